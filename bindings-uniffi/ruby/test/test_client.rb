# frozen_string_literal: true

require 'open3'
require_relative 'helper'

class TestClient < Minitest::Test
  def test_commands_and_typed_replies
    SentinelRecovery::Client.open(SHARED.url, protocol: 3) do |c|
      assert_equal SHARED.primary_port, c.ready.primary.port
      assert_equal 'OK', c.execute('SET', 'rb:k', 'v')
      assert_equal 'v', c.execute('GET', 'rb:k')
      assert_equal Encoding::BINARY, c.execute('GET', 'rb:k').encoding
      assert_nil c.execute('GET', 'rb:missing')
      c.execute('DEL', 'rb:list')
      assert_equal 2, c.execute('RPUSH', 'rb:list', 'a', 'b')
      assert_equal %w[a b], c.execute('LRANGE', 'rb:list', 0, -1)
      c.execute('HSET', 'rb:h', 'f', 1)
      assert_equal({ 'f' => '1' }, c.execute('HGETALL', 'rb:h'))
      c.execute('ZADD', 'rb:z', 1.5, 'm')
      assert_equal 1.5, c.execute('ZSCORE', 'rb:z', 'm')
      bytes = (0..255).map(&:chr).join.b
      c.execute('SET', 'rb:bin', bytes)
      assert_equal bytes, c.execute('GET', 'rb:bin')
    end
  end

  # The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads; its
  # header describes the columns): each call ends by its deadline with the expected outcome, and
  # afterwards no client is left blocked on the server (a timed-out blocking command's connection
  # was closed). Commands through #execute, pipelines through #pipeline and transactions through
  # #transaction (each with timeout: per call, which bounds the whole pipeline or transaction),
  # subscriptions through #subscribe (under the client's command_timeout_ms), the doctor through
  # SentinelRecovery.doctor with connect_timeout_ms (its report's status). Cancel cases end the
  # call with Ruby's own interruption, Timeout.timeout (Thread#raise), which cancels the library's
  # operation as the wait unwinds. "paused" cases stop the
  # current primary of a topology whose down-after (60 s) is far longer than the case, "failover"
  # cases stall a failover (sr-topology's stall-failover); both undo it afterwards and check that
  # the same client works again.
  def test_shared_deadline_cases
    cases = case_rows('deadlines.tsv', 8, 18)
    # A down-after far longer than any case: a paused primary stays the primary (no failover); a
    # failover-timeout as long: a stalled failover is not aborted while a case runs.
    topo = TestTopology.new('--replicas', '1', '--down-after', '60000', '--failover-timeout', '60000')
    SentinelRecovery::Client.open(topo.url) do |observer|
      blocked = lambda do
        observer.execute('INFO', 'clients')[/^blocked_clients:(\d+)/, 1].to_i
      end
      cases.each_with_index do |(name, kind, deadline, state, timeout_ms, block_ms, expect, command), serial|
        assert_includes %w[command pipeline transaction subscribe doctor], kind, "#{name}: kind"
        assert_includes %w[timeout nil config cancelled failure], expect, "#{name}: expect"
        per_call = deadline == 'per-call'
        # A doctor's steps each wait for at most a connect and one reply: 3 x its timeout.
        budget = if kind == 'doctor' && deadline == 'default'
                   (3 * timeout_ms.to_i + 1000) / 1000.0
                 else
                   (timeout_ms.to_i + (per_call ? 0 : block_ms.to_i) + 1000) / 1000.0
                 end
        key = "deadline-case:#{name}:#{serial}"
        commands = command.split(' ; ').map { |c| c.split(' ').map { |a| a.gsub('{key}', key) } }
        # A no-primary client's only sentinel is a loopback port nobody listens on.
        url = state == 'no-primary' ? 'redis+sentinel://127.0.0.1:1/mymaster' : topo.url
        # A doctor case's deadline is the doctor's connect_timeout_ms, not this client's; a
        # cancelled call's must not race the cancellation (as the JVM suite's rule).
        default_ms = deadline == 'default' && kind != 'doctor' ? timeout_ms.to_i : 30_000
        SentinelRecovery::Client.open(url, command_timeout_ms: default_ms) do |c|
          c.ready unless state == 'no-primary'
          before = blocked.call
          # The fault's undoing while it is in place: "cont PORT" or "release-failover PORT".
          undo = nil
          begin
            if state == 'paused'
              port = topo.cmd('primary').fetch('port')
              topo.cmd("stop #{port}")
              undo = "cont #{port}"
            elsif state == 'failover'
              undo = "release-failover #{topo.cmd('stall-failover').fetch('port')} 30000"
            end
            start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
            call = lambda do
              own = per_call ? timeout_ms.to_i / 1000.0 : nil
              case kind
              when 'command' then c.execute(*commands[0], timeout: own)
              when 'pipeline' then c.pipeline(*commands, timeout: own)
              when 'transaction' then c.transaction(*commands, timeout: own)
              # Its deadline is the client's command_timeout_ms; made anyway, it is closed.
              when 'subscribe' then c.subscribe(*commands[0].drop(1)) { nil }
              else
                watch = command == '-' ? nil : Float(command.delete_prefix('watch='))
                SentinelRecovery.doctor(url, watch: watch, connect_timeout_ms: timeout_ms.to_i)
              end
            end
            outcome = begin
              deadline == 'cancel' ? Timeout.timeout(timeout_ms.to_i / 1000.0) { call.call } : call.call
            rescue SentinelRecovery::Error, Timeout::Error => e
              e
            end
            took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
            puts "    #{name}: ended after #{(took * 1000).round} ms (allowed #{(budget * 1000).round} ms)"
            if undo
              line = undo
              undo = nil
              topo.cmd(line, 40)
            end
            assert_operator took, :<=, budget, "#{name}: ended after #{took.round(3)} s"
            if expect == 'nil'
              assert_nil outcome, "#{name}: expected a nil reply"
            elsif expect == 'cancelled'
              assert_kind_of Timeout::Error, outcome, "#{name}: expected the interruption"
            elsif expect == 'failure'
              refute_kind_of SentinelRecovery::Error, outcome, "#{name}: expected a report"
              assert_equal 'failure', outcome.status, "#{name}: the report's status (#{outcome.text})"
            else
              assert_kind_of SentinelRecovery::Error, outcome, "#{name}: expected #{expect}"
              assert_equal expect, outcome.code, name
            end
            if %w[paused failover].include?(state)
              assert_equal 'PONG', c.execute('PING', timeout: 10), "#{name}: PING after the fault"
            end
          ensure
            topo.cmd(undo, 40) if undo
          end
          wait_until(5, "#{name}: no client blocked on the server") { blocked.call <= before }
        end
      end
    end
  ensure
    topo&.close
  end

  # The shared doctor option cases (tests/cases/doctor_options.tsv; the rule is the core's
  # doctor::Options::from_host): watch: (seconds, the case's milliseconds / 1000) and pings: of
  # SentinelRecovery.doctor. Accepted: a report comes; refused: the config error naming the option.
  def test_shared_doctor_option_cases
    case_rows('doctor_options.tsv', 3, 10).each do |watch_ms, pings, expect|
      name = "#{watch_ms}/#{pings}"
      assert_includes %w[accepted refused], expect, "#{name}: expect"
      options = {}
      options[:watch] = (watch_ms == 'NaN' ? Float::NAN : Float(watch_ms)) / 1000 unless watch_ms == '-'
      options[:pings] = pings.include?('.') ? Float(pings) : Integer(pings) unless pings == '-'
      outcome = begin
        SentinelRecovery.doctor(SHARED.url, **options)
      rescue SentinelRecovery::Error => e
        e
      end
      if expect == 'accepted'
        refute_kind_of SentinelRecovery::Error, outcome, "#{name}: expected a report"
        assert_includes %w[healthy warning failure], outcome.status, name
      else
        assert_kind_of SentinelRecovery::Error, outcome, "#{name}: expected a config error"
        assert_equal 'config', outcome.code, name
        assert_match(watch_ms == '-' ? /pings must be/ : /watch must be/, outcome.detail, name)
      end
    end
  end

  # In a process that loads nothing else first (this suite's helper loads socket, which loads
  # io/wait and hid that the gem needed it): an asynchronous call completes.
  def test_the_gem_alone_waits_for_its_calls
    script = "require 'sentinel_recovery'; " \
             "print SentinelRecovery.doctor('redis+sentinel://127.0.0.1:1/mymaster').status"
    out, status = Open3.capture2e(RbConfig.ruby, '-e', script)
    assert status.success?, out
    assert_equal 'failure', out
  end

  def test_pipeline_and_transaction
    SentinelRecovery::Client.open(SHARED.url) do |c|
      replies = c.pipeline(%w[SET rb:p 1], %w[INCR rb:p], %w[NOSUCHCOMMAND], %w[GET rb:p])
      assert_equal 'OK', replies[0]
      assert_equal 2, replies[1]
      assert_kind_of SentinelRecovery::Error, replies[2]
      assert_equal 'server', replies[2].code
      assert_equal 'ERR', replies[2].server_code
      assert_equal '2', replies[3]
      assert_equal [3, '3'], c.transaction(%w[INCR rb:p], %w[GET rb:p])
    end
  end

  def test_errors_by_code
    error = assert_raises(SentinelRecovery::Error) do
      SentinelRecovery::Client.connect('redis+sentinel://127.0.0.1:26379/mymaster', command_timeout_ms: 'soon')
    end
    assert_equal 'config', error.code
    assert_instance_of SentinelRecovery::ERRORS.fetch('config'), error
    assert_includes error.message, 'command_timeout_ms'

    SentinelRecovery::Client.open(SHARED.url) do |c|
      e = assert_raises(SentinelRecovery::Error) { c.execute('NOSUCHCOMMAND') }
      assert_equal %w[server ERR], [e.code, e.server_code]
      c.execute('SET', 'rb:str', 'x')
      e = assert_raises(SentinelRecovery::Error) { c.execute('LPUSH', 'rb:str', 'y') }
      assert_equal 'WRONGTYPE', e.server_code
    end

    port = TCPServer.open('127.0.0.1', 0) { |s| s.addr[1] }
    SentinelRecovery::Client.open("redis+sentinel://127.0.0.1:#{port}/mymaster",
                                  command_timeout_ms: 500, sentinel_timeout_ms: 200) do |c|
      e = assert_raises(SentinelRecovery::Error) { c.ready }
      assert_equal 'sentinels_unreachable', e.code
    end

    # One class per code of the core's table, each found by its shared name.
    assert_equal 14, SentinelRecovery::ERRORS.size
    %w[no_healthy_primary queue_full closed internal not_replicated].each { |code| assert SentinelRecovery::ERRORS.key?(code), code }
  end

  def test_doctor_of_a_healthy_topology
    report = SentinelRecovery.doctor(SHARED.url)
    assert_equal 'healthy', report.status, report.text
    assert_equal 0, report.exit_code
    assert_includes report.json, '"schema"'
    e = assert_raises(SentinelRecovery::Error) { SentinelRecovery.doctor('redis://not-sentinel/x') }
    assert_equal 'config', e.code
  end

  def test_a_blocking_call_releases_the_gvl
    SentinelRecovery::Client.open(SHARED.url) do |c|
      c.ready
      ticks = 0
      ticker = Thread.new { loop { ticks += 1; sleep 0.001 } }
      c.execute('DEL', 'rb:empty')
      # BLPOP waits a second on the server; the ticker runs meanwhile only if the GVL is free.
      assert_nil c.execute('BLPOP', 'rb:empty', 1)
      ticker.kill
      assert_operator ticks, :>, 10
    end
  end

  def test_close_completes_in_flight_with_closed
    c = SentinelRecovery::Client.connect(SHARED.url)
    c.ready
    result = Queue.new
    waiter = Thread.new do
      c.execute('BLPOP', 'rb:never', 0)
      result << :returned
    rescue SentinelRecovery::Error => e
      result << e.code
    end
    wait_until(10, 'the BLPOP to be waiting') { waiter.status == 'sleep' }
    c.close
    assert_equal 'closed', Timeout.timeout(10) { result.pop }
    assert c.closed?
    e = assert_raises(SentinelRecovery::Error) { c.execute('PING') }
    assert_equal 'closed', e.code
    c.close # idempotent
  end

  def test_no_call_after_removal
    SentinelRecovery::Client.open(SHARED.url) do |c|
      c.ready
      kept = Queue.new
      removed_calls = 0
      keep = c.on_event { |e| kept << e }
      removed = c.on_event { |_e| removed_calls += 1 }
      removed.remove
      at_removal = removed_calls
      SHARED.cmd('add-sentinel')
      c.refresh
      seen = []
      wait_until(20, 'sentinels_changed at the listener still installed') do
        seen << kept.pop until kept.empty?
        seen.any? { |e| e.kind == 'sentinels_changed' }
      end
      keep.remove
      assert_equal at_removal, removed_calls
    end
  end

  def test_pubsub_through_a_kill9_failover
    t = TestTopology.new
    begin
      SentinelRecovery::Client.open(t.url, command_timeout_ms: 3000) do |c|
        c.ready
        kinds = Queue.new
        listener = c.on_event { |e| kinds << e.kind }
        got = Queue.new
        reader = nil
        c.subscribe('rb:news') do |sub|
          # One reader for the whole test (#next releases the GVL while it waits).
          reader = Thread.new { while (m = sub.next) do got << m end }
          c.execute('PUBLISH', 'rb:news', 'before')
          wait_until(10, 'the message published before the failover') { !got.empty? }
          assert_equal ['rb:news', 'before', nil], got.pop
          t.cmd("kill9 #{t.primary_port}")
          seen = []
          wait_until(40, 'subscription_restored after the kill') do
            seen << kinds.pop until kinds.empty?
            seen.include?('subscription_restored')
          end
          assert_operator seen.index('subscription_lost'), :<, seen.index('subscription_restored')
          # At-most-once: publish until one arrives from the new primary.
          published = 0
          while got.empty? && published < 50
            c.execute('PUBLISH', 'rb:news', "after-#{published}")
            published += 1
            deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.5
            sleep 0.02 while got.empty? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
          end
          refute got.empty?, 'a message after the failover'
          assert_match(/\Aafter-/, got.pop[1])
        end
        assert reader.join(10), 'the reader ends when the subscription closes'
        listener.remove
      end
    ensure
      t.close
    end
  end

  def test_events_through_a_kill9_failover
    t = TestTopology.new
    begin
      SentinelRecovery::Client.open(t.url, command_timeout_ms: 3000) do |c|
        c.ready
        events = Queue.new
        threads = Queue.new
        listener = c.on_event do |e|
          threads << Thread.current
          events << e
        end
        seen = []
        acked = 0
        errors = Hash.new(0)
        stop = false
        writers = Array.new(4) do
          Thread.new do
            until stop
              begin
                c.execute('INCR', 'rb:counter')
                acked += 1
              rescue SentinelRecovery::Error => e
                errors[e.code] += 1
                sleep 0.005
              end
            end
          end
        end
        wait_until(10, 'writes before the kill') { acked > 100 }
        t.cmd("kill9 #{t.primary_port}")
        new_port = t.cmd("wait-primary-not #{t.primary_port} 30000", 40).fetch('port')
        wait_until(30, 'primary_changed to the new primary') do
          seen << events.pop until events.empty?
          seen.any? { |e| e.kind == 'primary_changed' && e.detail.new.port == new_port }
        end
        after_switch = acked
        wait_until(20, 'writes after the switch') { acked > after_switch + 100 }
        stop = true
        writers.each(&:join)
        listener.remove
        assert_equal new_port, c.topology.primary.port
        kinds = seen.map(&:kind)
        assert_includes kinds, 'connection_lost'
        assert_operator kinds.index('connection_lost'), :<, kinds.index('primary_changed')
        assert_empty errors.keys - %w[timeout connection_lost]
        refute_includes [Thread.main], threads.pop
      end
    ensure
      t.close
    end
  end
end
