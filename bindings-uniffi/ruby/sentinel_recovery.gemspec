# frozen_string_literal: true

# Built by bindings-uniffi/scripts/ruby.sh from a staging directory that also holds the generated
# lib/sentinel_recovery/sentinel_recovery_uniffi.rb and the native library beside it.
Gem::Specification.new do |s|
  s.name = 'sentinel_recovery'
  s.version = ENV.fetch('SR_GEM_VERSION') # the workspace version, passed by ruby.sh
  s.summary = 'Finds and follows a Redis/Valkey primary through Sentinel, on threads it owns'
  s.description = 'Ruby binding of sentinel-recovery (Rust core, uniffi-generated ruby-ffi binding): ' \
                  'blocking calls that release the GVL, events via a callback.'
  s.authors = ['sentinel-recovery contributors']
  s.licenses = ['MIT', 'Apache-2.0']
  s.platform = Gem::Platform.new('x86_64-linux')
  s.required_ruby_version = '>= 3.0'
  s.files = Dir['lib/**/*.rb'] + Dir['lib/**/*.so']
  s.require_paths = ['lib']
  s.add_runtime_dependency 'ffi', '~> 1.15'
end
