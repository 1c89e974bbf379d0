'use strict'
/** The Client: opening, the commands, transactions, pub/sub, routing for adapters, closing. */

const { EventEmitter } = require('node:events')
const native = require('./native.js')
const pubsub = require('./pubsub.js')
const { makeError, fromNative } = require('./errors_by_code.js')
const { abortError, optionalSignal, asyncDispose } = require('./abort.js')
const { coreOptions, mapFunction, callOptions } = require('./options.js')
const { checkArgs, checkCommands } = require('./arguments.js')
const { Operations, wakeFunction } = require('./completions.js')
const { emitEvent } = require('./events.js')
const { Transaction } = require('./transaction.js')

/**
 * A client of one Sentinel-managed service. Create it with `Client.connect(url, options)`.
 * Emits `'event'` with every event, and each event under its kind's name too, from the first
 * discovery on: the first `primary_changed` has `old: null`, also when another client in the
 * process had already found the primary.
 */
class Client extends EventEmitter {
  /** @private Use Client.connect or Client.open. */
  constructor(url, options = {}) {
    super()
    if (typeof url !== 'string') throw new TypeError('url must be a string')
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
    const decode = Boolean(options.decodeResponses ?? options.decode_responses ?? false)
    this._ops = new Operations((json) => emitEvent(this, json))
    try {
      this._native = native.open(url, coreOptions(options), decode, wakeFunction(this), makeError, mapFunction(options))
      // The per-command call, bound to this client once (cheaper per call than a method).
      this._execute = this._native.executor()
    } catch (e) {
      throw fromNative(e)
    }
    this._ops.attach(this._native)
  }

  /**
   * Opens a client and waits for the first discovery round; if it finds no primary the client
   * is closed and the promise rejects with the reason (`SentinelsUnreachableError`,
   * `ServiceUnknownError`, `NoHealthyPrimaryError`).
   * @returns {Promise<Client>}
   */
  static async connect(url, options = {}) {
    const client = new Client(url, options)
    try {
      await client._op((op) => client._native.ready(op))
    } catch (e) {
      await client.close()
      throw e
    }
    return client
  }

  /** Opens a client without waiting for discovery (commands wait for a primary up to their deadline). */
  static open(url, options = {}) {
    return new Client(url, options)
  }

  /**
   * Runs one command, e.g. `execute(['SET', 'k', 'v'])`. Arguments are strings, Buffers,
   * Uint8Arrays, numbers or bigints. Resolves with the reply (Buffers for bulk strings unless
   * `decodeResponses`; a small one may share its ArrayBuffer with other replies, as Node's pooled
   * Buffers do), rejects with a SentinelRecoveryError subclass. Numbers are written as in
   * every binding: NaN is refused (ConfigError), +/-Infinity become `inf` / `-inf`, others their
   * shortest round-trip text (`String(n)`, `-0` kept); a string with a lone surrogate is refused
   * (ConfigError) rather than sent with U+FFFD in its place.
   *
   * `options.timeoutMs` is this command's deadline (instead of the client's `commandTimeoutMs`);
   * past it the promise rejects with TimeoutError. `options.signal` (an AbortSignal) cancels the
   * command: the promise rejects at once with an AbortError (`name` 'AbortError'); a command that
   * was already sent may still run on the server, and is never retried.
   * @param {Array<string|Buffer|Uint8Array|number|bigint>} args
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [options]
   */
  execute(args, options = undefined) {
    return this._call(checkArgs(args, 'execute'), options, 'execute', this._execute)
  }

  /**
   * Sends several commands back to back on one connection, e.g.
   * `pipeline([['SET', 'k', 'v'], ['INCR', 'n']])`, and resolves with one result per command, in
   * order: its reply, or its own error object (e.g. a ServerError for WRONGTYPE) in its place,
   * not thrown. Not atomic (see `transaction`). Rejects only when the pipeline failed as a whole
   * (no primary within the deadline; a command a pipeline can't carry such as BLPOP or MULTI,
   * nothing sent). Options as for `execute`: `timeoutMs` is the whole pipeline's deadline,
   * `signal` cancels it (commands already sent may have run; nothing is retried).
   * @param {Array<Array<string|Buffer|Uint8Array|number|bigint>>} commands
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [options]
   */
  pipeline(commands, options = undefined) {
    const pipeline = (op, checked, timeoutMs, cancellable) => this._native.pipeline(op, checked, timeoutMs, cancellable)
    return this._call(checkCommands(commands, 'pipeline'), options, 'pipeline', pipeline)
  }

  /**
   * Runs `commands` atomically (MULTI ... EXEC) on a dedicated connection to the primary, after
   * `WATCH ...options.watch` when given. Resolves with one reply per command (a command that
   * failed inside EXEC is an error object in its place), or `null` when a watched key changed
   * (nothing ran). Rejects with ConnectionLostError ("nothing was applied") when the primary
   * changed meanwhile. To read watched keys before EXEC, use `beginTransaction()`.
   * `options.timeoutMs` (checked as `execute`'s; default the client's `commandTimeoutMs`) bounds
   * the whole transaction, from the call until EXEC's reply: past it the promise rejects with
   * TimeoutError and the dedicated connection is closed (an EXEC sent but not answered in time
   * may or may not have been applied). A command a transaction can't carry (BLPOP, MULTI, ...)
   * rejects with ConfigError, nothing sent. `options.signal` (an AbortSignal) cancels it: the
   * promise rejects with AbortError and the dedicated connection is closed (an EXEC already sent
   * may have run; nothing is retried).
   * @param {Array<Array<string|Buffer|Uint8Array|number|bigint>>} commands
   * @param {{watch?: Array<string|Buffer|Uint8Array>, signal?: AbortSignal, timeoutMs?: number}} [options]
   */
  async transaction(commands, options = undefined) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw new TypeError('transaction options must be an object')
    }
    const { watch: watchOption, ...rest } = options ?? {}
    const watch = watchOption ?? []
    for (const key of Object.keys(rest)) {
      if (key !== 'timeoutMs' && key !== 'signal') {
        throw new TypeError(`unknown transaction option '${key}' (expected watch, signal, timeoutMs)`)
      }
    }
    // timeoutMs and signal as execute checks them.
    const opts = callOptions(rest, 'transaction')
    if (opts instanceof Error) throw opts
    const { timeoutMs, signal } = opts
    const checked = checkCommands(commands, 'transaction')
    if (checked instanceof Error) throw checked
    const keys = watch.length > 0 ? checkArgs(watch, 'watch') : []
    if (keys instanceof Error) throw keys
    if (signal !== undefined && signal.aborted) throw abortError(signal)
    return this._op((op) => this._native.transaction(op, checked, keys, timeoutMs, signal !== undefined), signal)
  }

  /**
   * Begins a transaction on a dedicated connection to the current primary (waiting for one like
   * a command). Then `await tx.watch(key)`, `await tx.execute(['GET', key])`,
   * `await tx.exec([[...], ...])`; `await using tx = await client.beginTransaction()` discards
   * it at the end of the scope unless `exec` ran.
   *
   * `options.timeoutMs` (checked as `execute`'s) bounds the whole transaction, from this call
   * until `exec` completes, time between the steps included: each step only has what is left,
   * and one started or still running when it runs out rejects with TimeoutError and ends the
   * transaction (its connection is closed; later steps reject with ConfigError, "the
   * transaction has ended"). Without it the begin waits up to `commandTimeoutMs` and each step
   * gets `commandTimeoutMs` of its own.
   * @param {{timeoutMs?: number}} [options]
   * @returns {Promise<Transaction>}
   */
  async beginTransaction(options = undefined) {
    const opts = callOptions(options, 'beginTransaction')
    if (opts instanceof Error) throw opts
    if (opts.signal !== undefined) throw new TypeError("unknown beginTransaction option 'signal' (expected timeoutMs)")
    let nativeTx
    const primary = await this._op((op) => {
      nativeTx = this._native.beginTransaction(op, opts.timeoutMs)
    })
    return new Transaction(this, nativeTx, primary)
  }

  /** The current topology: `{service, primary, replicas, sentinels, epoch, healthy}`. Never waits. */
  topology() {
    try {
      return JSON.parse(this._native.topology())
    } catch (e) {
      throw fromNative(e)
    }
  }

  /**
   * Subscribes to `channels` (and `options.patterns`) on a connection of the core's own; resolves
   * with a Subscription once the node confirmed them. It follows failovers (`subscription_lost` /
   * `subscription_restored` events; pub/sub is at-most-once). `options.buffer`: messages that may
   * wait (default 4096), beyond which the newest are dropped and counted (`dropped`).
   * `options.signal` (an AbortSignal) cancels the wait for the confirmation: the promise rejects
   * at once with an AbortError and no subscription is left open. The wait is bounded by the
   * client's `commandTimeoutMs` (TimeoutError); there is no per-call deadline.
   * @param {Array<string|Buffer>} channels
   * @param {{patterns?: Array<string|Buffer>, buffer?: number, signal?: AbortSignal}} [options]
   */
  async subscribe(channels, options = {}) {
    const { patterns = [], signal, ...rest } = options ?? {}
    if (optionalSignal({ signal })?.aborted) throw abortError(signal)
    return pubsub.subscribe(this, channels, patterns, rest, signal)
  }

  /** Subscribes to glob-style `patterns` (see subscribe()). */
  async psubscribe(patterns, options = {}) {
    const { signal, ...rest } = options ?? {}
    if (optionalSignal({ signal })?.aborted) throw abortError(signal)
    return pubsub.subscribe(this, [], patterns, rest, signal)
  }

  /**
   * For adapters that open connections of another library (`sentinel-recovery/ioredis`): the
   * node such a connection should go to, `{host, port}`. `primary` (default true) asks for the
   * ROLE-verified primary, never one a failover is demoting: it waits through a promotion and
   * while no primary is known, up to `options.timeoutMs` (default the client's
   * `commandTimeoutMs`), then rejects with TimeoutError. `primary` false asks for a node for
   * reads under the URL's `read_from`. Rejects at once on what waiting cannot fix (AuthError,
   * TlsError, ClosedError).
   * @param {boolean} [primary]
   * @param {{timeoutMs?: number}} [options]
   * @returns {Promise<{host: string, port: number}>}
   */
  async route(primary = true, options = undefined) {
    if (typeof primary !== 'boolean') throw new TypeError('route: primary must be a boolean')
    const opts = callOptions(options, 'route')
    if (opts instanceof Error) throw opts
    if (opts.signal !== undefined) throw new TypeError("unknown route option 'signal' (expected timeoutMs)")
    const [host, port] = await this._op((op) => this._native.route(op, primary, opts.timeoutMs))
    return { host: String(host), port: Number(port) }
  }

  /**
   * Whether a connection to `host:port` may still carry writes (`primary` true) or reads now:
   * false from the moment a failover starts demoting that node, or once it is no longer the
   * primary (or, for reads, in the topology). Synchronous, no I/O.
   */
  isRoutable(host, port, primary = true) {
    return this._native.isRoutable(host, port, primary)
  }

  /**
   * Whether a failover is demoting, or has replaced, `host:port`: a reply read from it now may
   * be discarded with its data set. Synchronous, no I/O.
   */
  isFenced(host, port) {
    return this._native.isFenced(host, port)
  }

  /**
   * A one-element Uint32Array over the low 32 bits of the core's routing counter: it changes
   * whenever `isRoutable` / `isFenced` may answer differently, so a verdict can be kept while it
   * reads the same (the ioredis adapter asks the core only then). Read it, never write it.
   */
  routingEpoch() {
    return new Uint32Array(this._native.routingEpoch(), 0, 1)
  }

  /**
   * Tells the core a connection of another library to `host:port` could not be opened or
   * found the wrong role: the core runs a calm, rate-limited rediscovery.
   */
  reportUnusable(host, port) {
    try {
      this._native.reportUnusable(host, port)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** Whether close() was called. */
  get closed() {
    return this._native.closed
  }

  /**
   * Closes the client; resolves when it is closed. Every command still pending settles before
   * (with ClosedError if it could not finish), every event the client received before is emitted
   * before, and no event is emitted after. Idempotent; may be called from an event listener.
   * @returns {Promise<void>}
   */
  async close() {
    await this._op((op) => this._native.close(op))
  }

  /** `await using client = await Client.connect(url)`: closes the client at the end of the scope. */
  async [asyncDispose]() {
    await this.close()
  }

  /**
   * Starts `begin(op, checked, timeoutMs, cancellable)` with the call's `options`
   * (`{timeoutMs, signal}`), or rejects with `checked` when it is an Error. A signal aborted
   * already rejects before anything is sent.
   */
  _call(checked, options, what, begin) {
    if (checked instanceof Error) return Promise.reject(checked)
    const opts = callOptions(options, what)
    if (opts instanceof Error) return Promise.reject(opts)
    const { timeoutMs, signal } = opts
    if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
    return this._ops.start((op) => begin(op, checked, timeoutMs, signal !== undefined), signal)
  }

  /** Starts one native operation and returns the promise it settles (see Operations.start). */
  _op(begin, signal = undefined) {
    return this._ops.start(begin, signal)
  }
}

module.exports = { Client }
