# frozen_string_literal: true

require 'socket'
require 'tmpdir'
require_relative 'helper'

# The fencing RESP proxy from Ruby, against real topologies: plain RESP over a socket (a client
# that knows nothing of Sentinel), through a planned failover on the same connection, options
# refused by name, the block form closing it.
class TestProxy < Minitest::Test
  # SET and GET through the proxy, then SENTINEL FAILOVER: once the proxy has moved the session
  # (a state: its moves counter), a SET on the same connection succeeds and its value is on the
  # new primary, not only replicated from the old one.
  def test_plain_resp_through_a_planned_failover
    t = TestTopology.new
    begin
      SentinelRecovery::Proxy.start(t.url, hold_ms: 20_000, command_timeout_ms: 5000) do |proxy|
        assert_equal "127.0.0.1:#{proxy.port}", proxy.address
        assert_equal "redis://127.0.0.1:#{proxy.port}", proxy.url
        c = RespConnection.tcp(proxy.host, proxy.port)
        # The first request waits for discovery within hold_ms.
        assert_equal 'PONG', c.call('PING')
        assert_equal 'OK', c.call('SET', 'rb:proxy', 'before')
        assert_equal 'before', c.call('GET', 'rb:proxy')
        direct = RespConnection.tcp('127.0.0.1', t.primary_port)
        assert_equal 'before', direct.call('GET', 'rb:proxy'), 'the value on the primary'
        direct.close
        assert_equal 0, proxy.stats.moves

        t.cmd('failover')
        new_port = t.cmd("wait-primary-not #{t.primary_port} 30000", 40).fetch('port')
        wait_until(30, 'the proxy to move its session off the old primary') { proxy.stats.moves >= 1 }

        assert_equal 'OK', c.call('SET', 'rb:proxy', 'after'), 'SET on the same connection after the failover'
        assert_equal 'after', c.call('GET', 'rb:proxy')
        direct = RespConnection.tcp('127.0.0.1', new_port)
        assert_equal 'master', direct.call('ROLE')[0], "the new primary's role"
        assert_equal 'after', direct.call('GET', 'rb:proxy'), 'the value on the new primary'
        direct.close
        # A connection opened after the failover lands on the new primary too.
        fresh = RespConnection.tcp(proxy.host, proxy.port)
        assert_equal 'after', fresh.call('GET', 'rb:proxy')
        fresh.close
        stats = proxy.stats
        assert_operator stats.commands_forwarded, :>=, 5
        assert_operator stats.primary_changes, :>=, 1
        assert_equal 0, stats.malformed_requests
        c.close
      end
    ensure
      t.close
    end
  end

  def test_bad_options_name_the_key
    url = 'redis+sentinel://127.0.0.1:1/mymaster'
    { hold_ms: 'soon', route: 'sideways', command_timeout_ms: 'x', allow_remote: 'maybe' }.each do |key, value|
      e = assert_raises(SentinelRecovery::Error, key.to_s) { SentinelRecovery::Proxy.start(url, key => value) }
      assert_equal 'config', e.code, key
      assert_includes e.message, key.to_s
    end
    e = assert_raises(SentinelRecovery::Error) { SentinelRecovery::Proxy.start(url, listen: '10.0.0.1:0') }
    assert_includes e.message, 'allow_remote'
    proxy = SentinelRecovery::Proxy.start(url)
    e = assert_raises(SentinelRecovery::Error) { proxy.close(grace: -1) }
    assert_equal 'config', e.code
    assert_includes e.message, 'grace'
    refute proxy.closed?, 'a refused grace closes nothing'
    assert_raises(TypeError) { proxy.close(grace: 'soon') }
    proxy.close(grace: 0)
    assert proxy.closed?
  end

  # The block's value is returned; at its end the proxy is closed: its sessions see their
  # connection closed and stats raise the closed error.
  def test_the_block_form_closes_the_proxy
    c = nil
    kept = nil
    result = SentinelRecovery::Proxy.start(SHARED.url) do |proxy|
      kept = proxy
      c = RespConnection.tcp(proxy.host, proxy.port, timeout: 10)
      assert_equal 'PONG', c.call('PING')
      assert_equal 1, proxy.stats.sessions_open
      :value
    end
    assert_equal :value, result
    assert kept.closed?
    assert c.closed_by_peer?, 'the session was not closed at close'
    e = assert_raises(SentinelRecovery::Error) { kept.stats }
    assert_equal 'closed', e.code
    kept.close # idempotent
  ensure
    c&.close
  end

  def test_a_unix_socket_listener
    Dir.mktmpdir('sr-ruby-proxy') do |dir|
      path = File.join(dir, 'redis.sock')
      SentinelRecovery::Proxy.start(SHARED.url, listen: "unix:#{path}", unix_mode: 0o600) do |proxy|
        assert_equal "unix:#{path}", proxy.address
        assert_equal path, proxy.path
        assert_nil proxy.port
        assert_equal "unix://#{path}", proxy.url
        assert_equal 0o600, File.stat(path).mode & 0o777
        c = RespConnection.new(UNIXSocket.new(path))
        assert_equal 'PONG', c.call('PING')
        c.close
      end
      refute File.exist?(path), 'the socket file is removed at close'
    end
  end
end
