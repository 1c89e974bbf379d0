# frozen_string_literal: true

require_relative 'helper'

# The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
# deadline module): each value, in seconds, as execute's timeout:. answers: the GET answers;
# accepted: it answers or times out (a deadline too short for a busy machine); refused:
# SentinelRecovery::Error with code config whose detail starts "timeout must be", nothing sent.
class TestTimeoutCases < Minitest::Test
  def test_shared_timeout_cases
    file = File.expand_path('../../../tests/cases/timeouts.tsv', __dir__)
    cases = File.readlines(file, chomp: true).reject { |l| l.strip.empty? || l.start_with?('#') }
    assert_operator cases.size, :>=, 8, "cases in #{file}"
    SentinelRecovery::Client.open(SHARED.url) do |c|
      c.ready
      cases.each do |line|
        value_ms, expect, why = line.split("\t")
        refute_nil why, "three tab-separated fields in #{line.inspect}"
        seconds = { 'NaN' => Float::NAN, 'inf' => Float::INFINITY }.fetch(value_ms) { Float(value_ms) } / 1000
        outcome = begin
          c.execute('GET', 'timeout-case:absent', timeout: seconds)
        rescue SentinelRecovery::Error => e
          e
        end
        if expect == 'answers' || (expect == 'accepted' && !(outcome.is_a?(SentinelRecovery::Error) && outcome.code == 'timeout'))
          assert_nil outcome, "#{value_ms} ms (#{why})"
        else
          assert_equal 'refused', expect, "#{value_ms} ms (#{why})"
          assert_kind_of SentinelRecovery::Error, outcome, "#{value_ms} ms (#{why})"
          assert_equal 'config', outcome.code, "#{value_ms} ms (#{why})"
          assert outcome.detail.start_with?('timeout must be'), "#{value_ms} ms: #{outcome.message}"
        end
      end
    end
  end
end
