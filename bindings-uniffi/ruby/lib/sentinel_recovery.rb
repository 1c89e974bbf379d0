# frozen_string_literal: true

# sentinel-recovery for Ruby: a Client and a fencing Proxy over the uniffi-generated binding
# (sentinel_recovery/sentinel_recovery_uniffi.rb, ruby-ffi). Calls that wait run as the library's
# async operations, which the generated code waits for on a pipe: the GVL is released while
# waiting, so other Ruby threads run. A call interrupted while it waits (Timeout.timeout,
# Thread#raise, Ctrl-C's Interrupt) cancels the library's operation as it unwinds: a blocking
# command's dedicated connection is closed, so the server stops blocking it. Events are queued
# by the core's thread and delivered to the block on a Ruby thread of the client's own.
# The generated code waits on its pipe with IO#wait_readable, which this Ruby has only with
# io/wait loaded.
require 'io/wait'
require_relative 'sentinel_recovery/sentinel_recovery_uniffi'

module SentinelRecovery
  Native = ::SentinelRecoveryUniffi

  # Every error of this library. Each shared code is a class of its own
  # (SentinelRecovery::Native::SentinelError::NoHealthyPrimary, ...) that includes this module, so
  # `rescue SentinelRecovery::Error` catches them all; #code is the shared code name.
  module Error
    def message
      server_code ? "#{code}: #{detail} (#{server_code})" : "#{code}: #{detail}"
    end
  end

  # The error class of each shared code name (`"no_healthy_primary"` => ...NoHealthyPrimary).
  ERRORS = Native::SentinelError.constants.to_h do |name|
    klass = Native::SentinelError.const_get(name)
    klass.include(Error)
    [name.to_s.gsub(/([a-z])([A-Z])/, '\1_\2').downcase, klass]
  end.freeze

  # Diagnoses the deployment of a redis+sentinel:// URL with a client's options, on the core's
  # threads (the GVL is released while it runs). `watch:` (seconds; more than 0, at most 3600)
  # samples a PING every 100 ms per sentinel for that long; `pings:` (1 to 1000, default 10)
  # sets the PINGs per sentinel; out of range they raise the config error naming the option
  # (the rule every binding keeps). Returns the report: #json (the documented schema), #text,
  # #status ("healthy", "warning", "failure") and #exit_code (0, 1, 2). Raises only for an
  # unusable URL or option (code "config"). Interrupting it (Timeout.timeout) stops it.
  def self.doctor(url, watch: nil, pings: nil, **options)
    [[:watch, watch], [:pings, pings]].each do |name, value|
      raise TypeError, "#{name} must be a number, not #{value.inspect}" unless value.nil? || value.is_a?(Numeric)
    end
    Native.doctor(url, options.to_h { |k, v| [k.to_s, v.to_s] }, watch&.to_f, pings&.to_f,
                  Native::TimeoutUnit::SECONDS)
  end

  # A client following one service's primary through Sentinel.
  class Client
    # Opens a client from a redis+sentinel:// URL and options (the URL's query keys); returns at
    # once, discovery runs on the core's threads.
    def self.connect(url, **options)
      new(Native::Client.connect(url, options.to_h { |k, v| [k.to_s, v.to_s] }))
    end

    def initialize(native)
      @native = native
      @listeners = []
      @lock = Mutex.new
    end

    # Waits until a verified primary is known; returns the topology.
    def ready
      @native.ready
    end

    # Runs one command; arguments are strings (sent as their bytes) or numbers. Returns nil,
    # Integer, Float, true/false, String (bulk replies in binary encoding), Array or Hash; a
    # failed command raises its SentinelRecovery::Error. `timeout:` (seconds) is this call's
    # own deadline instead of command_timeout_ms: it ends the whole call, blocking commands
    # included (BLPOP k 0: its connection is closed, so the server stops blocking it). It must
    # be greater than 0 and at most 2147483.647 (the rule every binding shares); otherwise the
    # call raises the config error and nothing is sent.
    def execute(*args, timeout: nil)
      return Client.value(@native.execute(Client.args(args))) if timeout.nil?

      Client.value(@native.execute_timeout(Client.args(args), Client.seconds(timeout), Native::TimeoutUnit::SECONDS))
    end

    # A `timeout:` as the Float the native call takes; anything but a number is a TypeError.
    def self.seconds(timeout)
      raise TypeError, "timeout must be a number of seconds, not #{timeout.inspect}" unless timeout.is_a?(Numeric)

      timeout.to_f
    end

    # Subscribes to channels (and patterns:) on a connection of the core's own that follows
    # failovers (subscription_lost / subscription_restored events); messages are at-most-once.
    # Returns a PubSub; with a block, yields it and closes it afterwards.
    def subscribe(*channels, patterns: [])
      sub = PubSub.new(@native.pubsub(Client.args(channels), Client.args(patterns), nil))
      return sub unless block_given?

      begin
        yield sub
      ensure
        sub.close
      end
    end

    # Sends commands back to back; a failed command's error object (not raised) in its place.
    # `timeout:` (seconds, the rule of #execute's) is the whole pipeline's deadline instead of
    # command_timeout_ms: past it the pipeline raises the timeout error as a whole.
    def pipeline(*commands, timeout: nil)
      cmds = commands.map { |c| Client.args(c) }
      results = if timeout.nil?
                  @native.pipeline(cmds)
                else
                  @native.pipeline_timeout(cmds, Client.seconds(timeout), Native::TimeoutUnit::SECONDS)
                end
      results.map { |r| Client.value(r, raise_errors: false) }
    end

    # MULTI/EXEC after WATCH watch...; nil when a watched key changed. `timeout:` (seconds, the
    # rule of #execute's; default command_timeout_ms) bounds the whole transaction, from the
    # call until EXEC's reply: past it the call raises the timeout error and the transaction's
    # dedicated connection is closed (an EXEC sent but not answered in time may or may not have
    # been applied).
    def transaction(*commands, watch: [], timeout: nil)
      cmds = commands.map { |c| Client.args(c) }
      keys = Client.args(watch)
      replies = if timeout.nil?
                  @native.transaction(cmds, keys)
                else
                  @native.transaction_timeout(cmds, keys, Client.seconds(timeout), Native::TimeoutUnit::SECONDS)
                end
      replies&.map { |r| Client.value(r, raise_errors: false) }
    end

    # The current topology (never waits on the network).
    def topology
      @native.topology
    end

    # Asks for a discovery round now.
    def refresh
      @native.refresh
    end

    # Calls the block with each event (SentinelRecovery::Native::Event: #kind, #service, #at_ms,
    # #detail), in order, on a Ruby thread of this subscription. Returns a Listener; #remove it
    # to stop (no call starts afterwards).
    def on_event(&block)
      raise ArgumentError, 'on_event needs a block' unless block

      listener = Listener.new(@native, block)
      @lock.synchronize { @listeners << listener }
      listener
    end

    def closed?
      @native.is_closed
    end

    # Closes the client: operations in flight fail with `closed`, listeners are removed.
    # Idempotent.
    def close
      @native.shutdown
      @lock.synchronize { @listeners.dup }.each(&:stop)
      nil
    end

    # Opens a client, yields it and closes it.
    def self.open(url, **options)
      client = connect(url, **options)
      begin
        yield client
      ensure
        client.close
      end
    end

    # Arguments as bytes: strings as they are, integers in decimal, floats as the core writes
    # them for every binding (2.5, 2, 1e+21, inf; NaN raises the config error naming it).
    def self.args(args)
      args.each_with_index.map do |a, index|
        case a
        when String then a.b
        when Integer then a.to_s
        when Float then Native.float_argument_text(a, index)
        when Symbol then a.to_s
        else raise TypeError, "command arguments are strings or numbers, not #{a.class}"
        end
      end
    end

    def self.value(reply, raise_errors: true)
      case reply
      when Native::Reply::NIL then nil
      when Native::Reply::INT, Native::Reply::DOUBLE, Native::Reply::BOOL, Native::Reply::SIMPLE then reply.value
      when Native::Reply::BULK, Native::Reply::VERBATIM then reply.value.b
      when Native::Reply::BIG_NUMBER then Integer(reply.text)
      when Native::Reply::ARRAY, Native::Reply::SET, Native::Reply::PUSH
        reply.items.map { |r| value(r, raise_errors: raise_errors) }
      when Native::Reply::MAP
        reply.entries.to_h { |e| [value(e.key, raise_errors: raise_errors), value(e.value, raise_errors: raise_errors)] }
      when Native::Reply::ERROR
        klass = ERRORS.fetch(reply.code, ERRORS.fetch('internal'))
        error = klass.new(code: reply.code, detail: reply.message, server_code: reply.server_code)
        raise error if raise_errors

        error
      else raise ArgumentError, "unknown reply #{reply.inspect}"
      end
    end
  end

  # A fencing RESP proxy in front of one Sentinel-managed service, running on the core's threads
  # in this process: any Redis client (redis-rb, hiredis, a subprocess) points at its address as
  # if at one standalone Redis, with no Sentinel code of its own. One session per client
  # connection with its own upstream connection to the ROLE-verified primary; from the moment a
  # promotion starts nothing is written to the old primary; at the change every session moves
  # with its state replayed; nothing that may have reached a server is re-sent.
  #
  #   SentinelRecovery::Proxy.start('redis+sentinel://127.0.0.1:26379/mymaster') do |proxy|
  #     redis = Redis.new(url: proxy.url)          # plain redis-rb
  #     redis.set('k', 'v')
  #   end                                           # closed at the block's end
  #
  # Options: the proxy's own (listen: "IP:PORT", default "127.0.0.1:0", or "unix:PATH"; an
  # address that is not loopback needs allow_remote: true, as the proxy passes on whatever
  # reaches it; hold_ms:, max_clients:, idle_timeout_ms:, max_request_bytes:, route: "primary" |
  # "read", lend_credentials:, unix_mode: an Integer such as 0o600 or octal text "600") and any
  # key of the URL's query for its client. A bad one raises the config error naming the key.
  #
  # Error replies of the proxy itself begin with a stable code word: UNCERTAIN (the command
  # reached a primary being demoted, or its connection broke before the reply: it may or may not
  # have been applied; never re-sent), FENCED (no verified primary within the hold bound: not
  # sent), NOTREPLICATED (wait_replicas not met), EXECABORT (a MULTI open at the change).
  class Proxy
    # Starts a proxy; returns once it accepts connections, never waiting for discovery (a
    # request that arrives before the primary is known waits within the hold bound). With a
    # block, yields the proxy, closes it when the block ends and returns the block's value.
    def self.start(url, **options)
      proxy = new(Native::Proxy.start(url, options.to_h { |k, v| [k.to_s, Proxy.option_text(k, v)] }))
      return proxy unless block_given?

      begin
        yield proxy
      ensure
        proxy.close
      end
    end

    # An option's value as the text the core parses (the core checks it); unix_mode as an
    # Integer is a file mode, written in octal.
    def self.option_text(key, value)
      return value.to_s(8) if key.to_s == 'unix_mode' && value.is_a?(Integer)

      value.to_s
    end

    def initialize(native)
      @native = native
    end

    # Where the proxy listens: "IP:PORT" ("[IP]:PORT" for IPv6) or "unix:PATH".
    def address
      @native.address
    end

    # The listening IP (without brackets for IPv6); nil on a Unix socket.
    def host
      @native.host
    end

    # The listening port; nil on a Unix socket.
    def port
      @native.port
    end

    # The Unix socket's path; nil on TCP.
    def path
      @native.path
    end

    # "redis://HOST:PORT" for clients that take a URL ("unix://PATH" on a Unix socket).
    def url
      return "unix://#{path}" if path

      host.include?(':') ? "redis://[#{host}]:#{port}" : "redis://#{host}:#{port}"
    end

    # The proxy's counters now (#sessions_open, #commands_forwarded, #commands_held,
    # #held_seconds, #fenced_replies, #moves, #primary_changes, ...); raises the closed error
    # once closed.
    def stats
      @native.stats
    end

    def closed?
      @native.is_closed
    end

    # Closes the proxy: stops accepting, lets replies in flight reach their clients for up to
    # `grace:` seconds (default 5; 0 closes at once), then closes every session and the
    # proxy's client. Waits with the GVL released. A grace below 0 or above 2147483.647 raises
    # the config error and closes nothing. Idempotent.
    def close(grace: nil)
      raise TypeError, "grace must be a number of seconds, not #{grace.inspect}" unless grace.nil? || grace.is_a?(Numeric)

      @native.shutdown(grace&.to_f, Native::TimeoutUnit::SECONDS)
      nil
    end

    def inspect
      "#<#{self.class.name} #{address}>"
    end
  end

  # An event subscription: the core's thread only pushes into a queue, a Ruby thread calls the
  # block.
  class Listener
    def initialize(native, block)
      @queue = Queue.new
      @stopped = false
      queue = @queue
      @subscription = native.subscribe(Forwarder.new(queue))
      @thread = Thread.new do
        while (event = queue.pop)
          block.call(event) unless @stopped
        end
      end
    end

    # Removes the listener; once this returns no call of the block starts.
    def remove
      @subscription.remove_async
      stop
    end

    def stop
      @stopped = true
      @queue.close
      @thread.join unless Thread.current == @thread
    end
  end

  # A pub/sub subscription. #next waits for a message (the GVL released meanwhile) and returns
  # [channel, payload, pattern] as binary strings (pattern nil for channels), or nil once closed.
  class PubSub
    def initialize(native)
      @native = native
    end

    def next
      m = @native.next
      m && [m.channel.b, m.payload.b, m.pattern&.b]
    end

    # Yields every message until the subscription is closed.
    def each
      while (m = self.next)
        yield(*m)
      end
    end

    def subscribe(*channels)
      @native.subscribe(Client.args(channels))
    end

    def unsubscribe(*channels)
      @native.unsubscribe(Client.args(channels))
    end

    # Messages dropped because the buffer was full.
    def dropped
      @native.dropped
    end

    def close
      @native.unsubscribe_all
    end

    def closed?
      @native.is_closed
    end
  end

  # The foreign listener (any object with #on_event): copies the event into the queue, nothing
  # more.
  class Forwarder
    def initialize(queue)
      @queue = queue
    end

    def on_event(event)
      @queue << event
    rescue ClosedQueueError
      nil
    end
  end
end
