# frozen_string_literal: true

# Real topologies from the testkit's sr-topology (one JSON line per stdin command) and waits on
# states.
require 'json'
require 'minitest/autorun'
require 'socket'
require 'timeout'
require 'sentinel_recovery'

# The rows of a shared cases file (tests/cases/NAME, which every binding's suite reads): its
# lines that are neither blank nor comments, split at tabs, each with `fields` fields, and at
# least `at_least` of them.
def case_rows(name, fields, at_least)
  file = File.expand_path("../../../tests/cases/#{name}", __dir__)
  rows = File.readlines(file, chomp: true).reject { |l| l.strip.empty? || l.start_with?('#') }.map { |l| l.split("\t") }
  rows.each { |row| raise "#{file}: #{fields} tab-separated fields in #{row.inspect}" unless row.size == fields }
  raise "#{file}: #{rows.size} cases" if rows.size < at_least

  rows
end

# One running `sr-topology up --json`.
class TestTopology
  attr_reader :url, :primary_port

  def initialize(*args)
    target = ENV.fetch('CARGO_TARGET_DIR')
    binary = ENV.fetch('SR_TOPOLOGY', File.join(target, 'debug', 'sr-topology'))
    @io = IO.popen([binary, 'up', '--json', *args], 'r+')
    info = JSON.parse(line(60))
    @url = info.fetch('url')
    @primary_port = Integer(info.fetch('primary').fetch('port'))
  end

  def line(seconds)
    Timeout.timeout(seconds, RuntimeError, "sr-topology gave no answer within #{seconds}s") do
      @io.gets or raise 'sr-topology exited'
    end
  end

  # Sends one command and returns its answer, asserting ok.
  def cmd(command, seconds = 60)
    @io.puts(command)
    @io.flush
    answer = JSON.parse(line(seconds))
    raise "#{command}: #{answer}" unless answer['ok']

    answer
  end

  def close
    @io.close_write # EOF stops everything
    @io.read
    @io.close
  end
end

# Polls the block until it is truthy; fails after `seconds`.
def wait_until(seconds, what)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  loop do
    value = yield
    return value if value
    raise "timed out after #{seconds}s waiting for #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    sleep 0.02
  end
end

SHARED = TestTopology.new
Minitest.after_run { SHARED.close }

# A plain RESP2 connection over a socket (TCPSocket, UNIXSocket), as a client that knows nothing
# of Sentinel speaks to a proxy or a node: commands written as arrays of bulk strings, replies read
# as String (simple and bulk), Integer, nil, Array or RespConnection::Error. Every read gives up
# after `timeout` seconds, so a test waiting on a reply fails instead of hanging.
class RespConnection
  Error = Struct.new(:message)

  def self.tcp(host, port, timeout: 30)
    new(TCPSocket.new(host, port), timeout: timeout)
  end

  def initialize(io, timeout: 30)
    @io = io
    @timeout = timeout
  end

  # Writes one command without reading its reply (pipelining).
  def send_command(*args)
    @io.write("*#{args.size}\r\n" + args.map { |a| "$#{a.to_s.bytesize}\r\n#{a}\r\n" }.join)
  end

  # Sends one command and reads its reply.
  def call(*args)
    send_command(*args)
    read
  end

  # Reads one reply; EOFError when the peer closed the connection.
  def read
    line = Timeout.timeout(@timeout) { @io.gets("\r\n") } or raise EOFError, 'the connection was closed'
    rest = line.chomp("\r\n")[1..]
    case line[0]
    when '+' then rest
    when '-' then Error.new(rest)
    when ':' then Integer(rest)
    when '$' then (n = Integer(rest)).negative? ? nil : Timeout.timeout(@timeout) { @io.read(n + 2) }[0, n]
    when '*' then (n = Integer(rest)).negative? ? nil : Array.new(n) { read }
    else raise "not a RESP2 reply: #{line.inspect}"
    end
  end

  # Whether the peer closed the connection (end of stream or reset) within the timeout.
  def closed_by_peer?
    Timeout.timeout(@timeout) { @io.read(1).nil? }
  rescue Errno::ECONNRESET, IOError
    true
  rescue Timeout::Error
    false
  end

  def close
    @io.close
  end
end
