'use strict'
/**
 * sentinel-recovery for Node.js: a Promise client of a Redis/Valkey service managed by Sentinel.
 *
 * Discovery, DNS, failover, connecting and reconnecting run on the Rust core's own threads; the
 * commands a client keeps in flight are written and their replies read on the event loop's thread
 * with non-blocking calls (src/own_replies.rs), so the loop never waits on the network or on
 * discovery. See index.d.ts for the API.
 */

const { EventEmitter } = require('node:events')
const native = require('./native.js')
const tables = require('./tables.js')
// The class of each error code and ERROR_CLASSES, generated from the core's table.
const errors = require('./errors.js')
const { SentinelRecoveryError, ERROR_CLASSES } = errors
const pubsub = require('./pubsub.js')

/** The event kinds (from the generated table), each also emitted under its own name. */
const EVENT_KINDS = Object.freeze(Object.keys(tables.EVENT_KINDS))

function makeError(code, message, serverCode) {
  const Class = Object.hasOwn(ERROR_CLASSES, code) ? ERROR_CLASSES[code] : SentinelRecoveryError
  return new Class(message, code, serverCode == null ? null : serverCode)
}

/**
 * An error thrown by the native module as its SentinelRecoveryError subclass: the native module
 * puts the stable code in the error's `code` property. Anything else (a napi argument error) is
 * returned as it is.
 */
function fromNative(e) {
  if (e instanceof Error && typeof e.code === 'string' && Object.hasOwn(ERROR_CLASSES, e.code)) {
    return makeError(e.code, e.message, null)
  }
  return e
}

/**
 * Rejection of a command whose AbortSignal fired, as Node's own APIs reject (`name`
 * 'AbortError', `code` 'ABORT_ERR', the signal's reason as `cause`). The command may have been
 * sent, and then may have run on the server; it is never retried.
 */
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options)
    this.name = 'AbortError'
    this.code = 'ABORT_ERR'
  }
}

function abortError(signal, message = 'The command was aborted (it may have been sent, and may have run on the server)') {
  return new AbortError(message, { cause: signal.reason })
}

/** The message of a doctor() whose AbortSignal fired. */
const DOCTOR_ABORTED = 'The diagnosis was aborted'

/** `options.signal` checked: undefined or an AbortSignal, else a TypeError is thrown. */
function optionalSignal(options) {
  const signal = options?.signal ?? undefined
  if (signal !== undefined && !isAbortSignal(signal)) throw new TypeError('signal must be an AbortSignal')
  return signal
}

/** Whether `s` looks like an AbortSignal (also one from another realm or a polyfill). */
function isAbortSignal(s) {
  return (
    s !== null &&
    typeof s === 'object' &&
    typeof s.aborted === 'boolean' &&
    typeof s.addEventListener === 'function' &&
    typeof s.removeEventListener === 'function'
  )
}

/** `decodeResponses` -> `decode_responses`; snake_case keys are kept as they are. */
function snakeCase(key) {
  return key.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())
}

/** Options object -> flat [key, value, ...] of core keys and strings; the core checks them. */
function coreOptions(options) {
  const flat = []
  for (const [key, value] of Object.entries(options)) {
    if (key === 'decodeResponses' || key === 'decode_responses' || value === undefined) continue
    if (typeof value === 'function' && snakeCase(key) === 'address_map') continue // mapFunction()
    flat.push(snakeCase(key), value === null ? '' : String(value))
  }
  return flat
}

/**
 * The function form of `addressMap` wrapped for the native side: it gets the reported address as
 * JSON text and returns JSON text (`{host, port}`, `{error}` when the function threw) or null,
 * so nothing JavaScript throws crosses into the core. `undefined` without a function.
 */
function mapFunction(options) {
  const fn = options.addressMap ?? options.address_map
  if (typeof fn !== 'function') return undefined
  return (reported) => {
    try {
      const mapped = fn(JSON.parse(reported))
      if (mapped == null) return null
      return JSON.stringify({ host: mapped.host, port: mapped.port })
    } catch (e) {
      return JSON.stringify({ error: String((e && e.message) || e) })
    }
  }
}

/** Whether `s` is well-formed UTF-16 (no lone surrogate), so it has an exact UTF-8 form. */
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)

/**
 * A number argument as every binding writes it (NaN is refused before this): bigints and
 * integral numbers below 1e21 in decimal, +/-Infinity as `inf` / `-inf` (as Redis writes them),
 * other numbers as their shortest round-trip text, `-0` with its sign.
 */
function numberText(n) {
  if (typeof n === 'bigint') return n.toString()
  if (n === Infinity) return 'inf'
  if (n === -Infinity) return '-inf'
  if (Object.is(n, -0)) return '-0'
  return String(n)
}

/** Checks and converts one command's arguments; a copy when numbers were converted, or an Error. */
function checkArgs(args, what) {
  if (!Array.isArray(args) || args.length === 0) {
    return new TypeError(`${what} expects a non-empty array of arguments`)
  }
  let copied = false
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    if (typeof a === 'string') {
      if (!isWellFormed(a)) {
        return makeError('config', `argument ${i} is not valid Unicode: lone surrogate`, null)
      }
    } else if (!(a instanceof Uint8Array)) {
      if (typeof a === 'number' || typeof a === 'bigint') {
        if (typeof a === 'number' && Number.isNaN(a)) {
          return makeError('config', `argument ${i} is NaN`, null)
        }
        if (!copied) {
          args = args.slice()
          copied = true
        }
        args[i] = numberText(a)
      } else {
        return new TypeError(`argument ${i} must be a string, Buffer or number`)
      }
    }
  }
  return args
}

/** Checks every command of a pipeline or transaction; the converted commands, or an Error. */
function checkCommands(commands, what) {
  if (!Array.isArray(commands)) return new TypeError(`${what} expects an array of commands`)
  const out = []
  for (let i = 0; i < commands.length; i++) {
    const c = checkArgs(commands[i], `${what} command ${i}`)
    if (c instanceof Error) {
      if (c instanceof SentinelRecoveryError) c.message = `command ${i}: ${c.message}`
      return c
    }
    out.push(c)
  }
  return out
}

/** `{timeoutMs, signal}` checked, or an Error. */
function callOptions(options, what) {
  let timeoutMs
  let signal
  if (options === undefined) return { timeoutMs, signal }
  if (options === null || typeof options !== 'object') {
    return new TypeError(`${what} options must be an object`)
  }
  for (const key of Object.keys(options)) {
    if (key !== 'timeoutMs' && key !== 'signal') {
      return new TypeError(`unknown ${what} option '${key}' (expected timeoutMs, signal)`)
    }
  }
  timeoutMs = options.timeoutMs ?? undefined
  signal = options.signal ?? undefined
  // Its range is the core's rule (every binding's): the native call refuses with `config`.
  if (timeoutMs !== undefined && typeof timeoutMs !== 'number') {
    return new TypeError(`timeoutMs must be a number of milliseconds, not ${typeof timeoutMs}`)
  }
  if (signal !== undefined && !isAbortSignal(signal)) {
    return new TypeError('signal must be an AbortSignal')
  }
  return { timeoutMs, signal }
}

/**
 * `Symbol.asyncDispose` where the runtime has it, else the well-known
 * `Symbol.for('nodejs.asyncDispose')` that TypeScript's `await using` and Node's own classes use.
 */
const asyncDispose = typeof Symbol.asyncDispose === 'symbol' ? Symbol.asyncDispose : Symbol.for('nodejs.asyncDispose')

/**
 * A transaction begun with `client.beginTransaction()`, on a dedicated connection to the primary
 * it began on. `exec` ends it; `discard()` (or leaving an `await using` scope) ends it without
 * running anything. `exec` rejects with ConnectionLostError ("nothing was applied") when the
 * primary changed since the transaction began: begin again on the new primary.
 */
class Transaction {
  /** @private */
  constructor(client, id, primary) {
    this._client = client
    this._id = id
    /** The primary (`host:port`) the transaction runs on. */
    this.primary = primary
  }

  /** `WATCH keys...`: `exec` then resolves with `null` if any of them changed. */
  watch(...keys) {
    const checked = checkArgs(keys, 'watch')
    if (checked instanceof Error) return Promise.reject(checked)
    return this._client._op((op) => this._client._native.transactionWatch(op, this._id, checked))
  }

  /** Runs one command now on the transaction's connection (a read between WATCH and EXEC). */
  execute(args) {
    const checked = checkArgs(args, 'execute')
    if (checked instanceof Error) return Promise.reject(checked)
    return this._client._op((op) => this._client._native.transactionExecute(op, this._id, checked))
  }

  /**
   * MULTI, `commands`, EXEC: resolves with one reply per command, or `null` when a watched key
   * changed (nothing ran). Ends the transaction.
   */
  exec(commands) {
    const checked = checkCommands(commands, 'exec')
    if (checked instanceof Error) {
      this.discard()
      return Promise.reject(checked)
    }
    return this._client._op((op) => this._client._native.transactionExec(op, this._id, checked))
  }

  /** Ends the transaction without running anything. Idempotent. */
  discard() {
    this._client._native.transactionDiscard(this._id)
  }

  /** `await using`: discards the transaction unless `exec` ran. */
  async [asyncDispose]() {
    this.discard()
  }
}

/** The level names of log records, by Python's level numbers (the scale of every binding). */
const LOG_LEVELS = Object.freeze({ trace: 5, debug: 10, info: 20, warn: 30, error: 40 })

function levelName(n) {
  if (n >= 40) return 'error'
  if (n >= 30) return 'warn'
  if (n >= 20) return 'info'
  if (n >= 10) return 'debug'
  return 'trace'
}

let logger = null

/**
 * Sends the core's log records to `fn({level, levelNumber, target, message})` on the event loop,
 * for records at `options.level` ('trace', 'debug', 'info', 'warn' (default), 'error') or above;
 * `null` stops it. Process-wide, for every client. `target` is the emitting module (always under
 * `sentinel_recovery`); messages never contain a password. An exception thrown by `fn` is
 * reported as an uncaught exception; later records are still delivered. At most 10 000 records
 * wait for the event loop: beyond that the newest are dropped and a 'warn' record with their
 * count comes in their place; events a client could not hand to its listeners in time (more
 * than 65 536 waiting) are reported the same way.
 * @param {((record: {level: string, levelNumber: number, target: string, message: string}) => void) | null} fn
 * @param {{level?: 'trace'|'debug'|'info'|'warn'|'error'}} [options]
 */
function setLogger(fn, options = {}) {
  if (fn !== null && typeof fn !== 'function') throw new TypeError('setLogger expects a function or null')
  const name = options.level ?? 'warn'
  if (!Object.hasOwn(LOG_LEVELS, name)) {
    throw makeError('config', `unknown log level '${name}' (expected ${Object.keys(LOG_LEVELS).join(', ')})`, null)
  }
  if (fn === null) {
    logger = null
    native.setLogger(null, LOG_LEVELS[name])
    return
  }
  logger = fn
  const onWake = () => {
    const records = native.drainLogs()
    if (logger === null) return
    for (const r of records) {
      try {
        logger({ level: levelName(r.level), levelNumber: r.level, target: r.target, message: r.message })
      } catch (e) {
        process.nextTick(() => {
          throw e
        })
      }
    }
  }
  native.setLogger(onWake, LOG_LEVELS[name])
}

let nextClientId = 1
/**
 * Clients with pending operations, by id: only these are kept reachable (a pending command keeps
 * its client, and the process, alive). The wake function does not look clients up here.
 */
const busy = new Map()

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
    const id = nextClientId++
    const decode = Boolean(options.decodeResponses ?? options.decode_responses ?? false)
    this._id = id
    /** Pending operations by id: {resolve, reject, cleanup}. Ids are never 0 (0 marks an event). */
    this._pending = new Map()
    this._nextOp = 1
    this._nextTx = 1
    this._held = false
    this._releaseQueued = false
    this._releaseIfIdle = () => {
      this._releaseQueued = false
      if (this._held && this._pending.size === 0) {
        this._held = false
        busy.delete(this._id)
        this._native.hold(false)
      }
    }
    // The wake function references only a WeakRef, never the client, so a dropped client can be
    // collected (and is then closed by the native side); only clients with pending operations
    // are kept reachable, in `busy`.
    const self = new WeakRef(this)
    // The native side calls this with what finished (already taken from its queue): a batch of
    // a collected client has no one left to settle.
    const onWake = (done, ok, value, offset, length) => {
      const client = self.deref()
      if (client && client._native) client._settle(done, ok, value, offset, length)
    }
    try {
      this._native = native.open(url, coreOptions(options), decode, onWake, makeError, mapFunction(options))
      // The per-command call, bound to this client once (cheaper per call than a method).
      this._execute = this._native.executor()
    } catch (e) {
      throw fromNative(e)
    }
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
    const checked = checkArgs(args, 'execute')
    if (checked instanceof Error) return Promise.reject(checked)
    const opts = callOptions(options, 'execute')
    if (opts instanceof Error) return Promise.reject(opts)
    const { timeoutMs, signal } = opts
    // Aborted before it started: nothing is sent.
    if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
    return this._op((op) => this._execute(op, checked, timeoutMs, signal !== undefined), signal)
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
    const checked = checkCommands(commands, 'pipeline')
    if (checked instanceof Error) return Promise.reject(checked)
    const opts = callOptions(options, 'pipeline')
    if (opts instanceof Error) return Promise.reject(opts)
    const { timeoutMs, signal } = opts
    if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
    return this._op((op) => this._native.pipeline(op, checked, timeoutMs, signal !== undefined), signal)
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
    const txId = this._nextTx++
    if (this._nextTx > 0xffffffff) this._nextTx = 1
    const primary = await this._op((op) => this._native.beginTransaction(op, txId, opts.timeoutMs))
    return new Transaction(this, txId, primary)
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
   * Starts one native operation and returns the promise it settles. With `signal`, `start`
   * returns the native operation, cancelled (and the promise rejected) when the signal fires.
   */
  _op(start, signal = undefined) {
    const op = this._nextOp++
    if (this._nextOp > 0xffffffff) this._nextOp = 1
    let entry
    const promise = new Promise((resolve, reject) => {
      entry = { resolve, reject, cleanup: null }
    })
    this._pending.set(op, entry)
    if (!this._held) {
      this._held = true
      busy.set(this._id, this)
      this._native.hold(true)
    }
    let started
    try {
      started = start(op)
    } catch (e) {
      this._pending.delete(op)
      entry.reject(fromNative(e))
      this._release()
      return promise
    }
    if (signal !== undefined && started && this._pending.get(op) === entry) {
      const onAbort = () => {
        if (this._pending.get(op) !== entry) return
        this._pending.delete(op)
        // The core completes the cancelled operation too (with `closed`); that completion finds
        // no pending entry and is dropped.
        started.cancel()
        entry.reject(abortError(signal))
        this._release()
      }
      signal.addEventListener('abort', onAbort, { once: true })
      entry.cleanup = () => signal.removeEventListener('abort', onAbort)
    }
    return promise
  }

  /**
   * Lets the client go (unreferenced, collectable) once nothing is pending. Checked in a
   * microtask, after those the settled promises queued: code awaiting one command and sending
   * the next (the sequential case) finds the client still held, and costs no unhold and
   * re-hold (two native calls) per command.
   */
  _release() {
    if (this._held && !this._releaseQueued && this._pending.size === 0) {
      this._releaseQueued = true
      queueMicrotask(this._releaseIfIdle)
    }
  }

  /**
   * Settles every finished operation and emits every event of `done` (`[id, ok, value, ...]`,
   * where a small Buffer reply is `[id, slab, offset << 13 | length]`), in the order the core
   * produced them; or, called as `(id, ok, value)`, settles that one
   * operation (one completion read on this thread), and as `(id, true, slab, offset, length)`
   * with a small Buffer reply: its bytes in the shared ArrayBuffer `slab` (as Node's own small
   * Buffers share a pool). Runs on the event loop, woken by the core.
   */
  _settle(done, ok, value, offset, length) {
    if (typeof done === 'number') {
      this._complete(done, ok, offset === undefined ? value : Buffer.from(value, offset, length))
    } else {
      for (let i = 0; i < done.length; i += 3) {
        const id = done[i]
        const ok = done[i + 1]
        if (id === 0) this._event(done[i + 2])
        else if (typeof ok === 'boolean') this._complete(id, ok, done[i + 2])
        else this._complete(id, true, Buffer.from(ok, done[i + 2] >>> 13, done[i + 2] & 0x1fff))
      }
    }
    this._release()
  }

  /**
   * Settles operation `id` with `value`: resolved if `ok`, else rejected. The core completes each
   * operation once; only one aborted here has settled already (its completion, `closed`, finds no
   * pending entry).
   */
  _complete(id, ok, value) {
    const p = this._pending.get(id)
    if (p === undefined) return
    this._pending.delete(id)
    if (p.cleanup !== null) p.cleanup()
    if (ok) p.resolve(value)
    else p.reject(value)
  }

  _event(json) {
    const event = JSON.parse(json)
    if (event.kind === 'discovery_failed' && event.error) {
      event.error = makeError(event.error.code, event.error.message, event.error.server_code)
    }
    try {
      this.emit('event', event)
      this.emit(event.kind, event)
    } catch (e) {
      // Like any other emitter with no caller to throw to: an uncaught exception (reported to
      // process 'uncaughtException' listeners). The events and completions after it are still
      // delivered.
      process.nextTick(() => {
        throw e
      })
    }
  }
}

/**
 * Diagnoses the deployment of `url` (what `sentinel-recovery doctor` does) on the core's threads
 * and resolves with the report: `{status, exitCode, headline, findings, report, json, text}`.
 * `options` are a client's (camelCase or snake_case, `addressMap` as text or function) plus
 * `watchMs` (sample a PING every 100 ms per sentinel for that long; more than 0, at most
 * 3600000) and `pings` (per sentinel, 1 to 1000, default 10). Rejects only when no diagnosis is
 * possible (a ConfigError for a bad URL or option, or one of these out of range); every problem
 * of the deployment is in the report. `options.signal` (an AbortSignal) stops the diagnosis:
 * the promise rejects at once with an AbortError.
 * @param {string} url
 * @param {object} [options]
 */
function doctor(url, options = {}) {
  return new Promise((resolve, reject) => {
    if (typeof url !== 'string') throw new TypeError('url must be a string')
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
    const { watchMs, pings, signal, ...rest } = options
    if (optionalSignal({ signal })?.aborted) throw abortError(signal, DOCTOR_ABORTED)
    let onAbort
    const done = (text) => {
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
      const r = JSON.parse(text)
      if (!r.ok) return reject(makeError(r.code, r.message, null))
      const report = JSON.parse(r.json)
      resolve({
        status: r.status,
        exitCode: r.exitCode,
        headline: report.verdict.headline,
        findings: report.findings,
        report,
        json: r.json,
        text: r.text,
      })
    }
    let operation
    try {
      operation = native.doctor(url, coreOptions(rest), watchMs ?? undefined, pings ?? undefined, mapFunction(rest), done)
    } catch (e) {
      return reject(fromNative(e))
    }
    if (signal !== undefined) {
      // The core then completes the diagnosis with `closed`, which settles nothing any more.
      onAbort = () => {
        operation.cancel()
        reject(abortError(signal, DOCTOR_ABORTED))
      }
      signal.addEventListener('abort', onAbort, { once: true })
    }
  })
}

/**
 * The options of startProxy() that belong to the proxy, by their JavaScript name: the core's key
 * and how a value becomes its text. The core checks every value (its error names the key); any
 * other option belongs to the proxy's client, as for Client.connect (camelCase turned into the
 * core's snake_case). The core's names (`hold_ms`, ...) are taken too.
 */
const PROXY_OPTIONS = Object.freeze({
  listen: ['listen', String],
  holdMs: ['hold_ms', String],
  maxClients: ['max_clients', String],
  idleTimeoutMs: ['idle_timeout_ms', String],
  maxRequestBytes: ['max_request_bytes', String],
  route: ['route', String],
  lendCredentials: ['lend_credentials', String],
  allowRemote: ['allow_remote', String],
  // A number is a file mode (0o600); the core reads text as octal ('600').
  unixMode: ['unix_mode', (v) => (typeof v === 'number' ? v.toString(8) : String(v))],
})

/** The same entries by the core's key, so `hold_ms` converts as `holdMs` does. */
const PROXY_OPTIONS_BY_KEY = Object.freeze(Object.fromEntries(Object.values(PROXY_OPTIONS).map((e) => [e[0], e])))

/** startProxy()'s options object -> flat [key, value, ...] of core keys and strings. */
function proxyOptions(options) {
  const flat = []
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue
    if (typeof value === 'function') {
      throw new TypeError(`startProxy option '${key}' can't be a function (addressMap takes its text form here: 'host:port>host:port,...')`)
    }
    const entry = Object.hasOwn(PROXY_OPTIONS, key) ? PROXY_OPTIONS[key] : Object.hasOwn(PROXY_OPTIONS_BY_KEY, key) ? PROXY_OPTIONS_BY_KEY[key] : undefined
    if (entry !== undefined) flat.push(entry[0], value === null ? '' : entry[1](value))
    else flat.push(snakeCase(key), value === null ? '' : String(value))
  }
  return flat
}

/**
 * Running proxies (not yet closed): kept reachable, as a listening server is, so that one the
 * code let go of goes on serving until it is closed.
 */
const runningProxies = new Set()

/**
 * A fencing RESP proxy in this process (on the core's threads): any Redis client pointed at
 * `url` (or `path`) as if at one standalone Redis follows the primary through failovers. Made by
 * startProxy(). Keeps the process alive until closed, as a listening server does (`unref()`).
 */
class Proxy {
  /** @private Use startProxy(). */
  constructor(nativeProxy, closed) {
    this._native = nativeProxy
    this._closed = closed
    this._closing = null
    /** Where it listens: `IP:PORT` (`[IP]:PORT` for IPv6) or `unix:PATH`. */
    this.address = nativeProxy.address
    const host = nativeProxy.host
    /** The listening IP (TCP), else undefined. */
    this.host = host ?? undefined
    /** The listening port (TCP), else undefined. */
    this.port = nativeProxy.port ?? undefined
    /** The Unix socket's path, else undefined. */
    this.path = nativeProxy.path ?? undefined
    /**
     * `redis://IP:PORT` (what ioredis and node-redis take), or `unix://PATH` on a Unix socket
     * (ioredis and node-redis take the `path` itself there).
     */
    this.url = host != null ? `redis://${host.includes(':') ? `[${host}]` : host}:${this.port}` : `unix://${this.path}`
  }

  /**
   * The proxy's counters (the names every language and the CLI's metrics use): `sessions_open`,
   * `sessions_accepted`, `sessions_refused`, `commands_forwarded`, `commands_held`,
   * `held_seconds`, `held_expired`, `fenced_replies`, `not_replicated`, `moves`,
   * `sessions_closed_at_move`, `primary_changes`, `upstream_errors`, `malformed_requests`.
   * Throws ClosedError once close() was called.
   */
  stats() {
    try {
      return JSON.parse(this._native.stats())
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** Whether close() was called. */
  get closed() {
    return this._closing !== null
  }

  /**
   * Stops accepting, lets replies in flight reach their clients for up to `options.graceMs`
   * (default 5000; 0 closes at once), then closes every session and the proxy's client; resolves
   * when that is done, on the core's threads (the event loop never waits). Idempotent: a later
   * call returns the first one's promise. A `graceMs` out of range (0 to 2147483647) rejects
   * with ConfigError, nothing closed.
   * @param {{graceMs?: number}} [options]
   * @returns {Promise<void>}
   */
  close(options = undefined) {
    if (this._closing !== null) return this._closing
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      return Promise.reject(new TypeError('close options must be an object'))
    }
    for (const key of Object.keys(options ?? {})) {
      if (key !== 'graceMs') return Promise.reject(new TypeError(`unknown close option '${key}' (expected graceMs)`))
    }
    const graceMs = options?.graceMs ?? undefined
    if (graceMs !== undefined && typeof graceMs !== 'number') {
      return Promise.reject(new TypeError(`graceMs must be a number of milliseconds, not ${typeof graceMs}`))
    }
    try {
      this._native.close(graceMs)
    } catch (e) {
      return Promise.reject(fromNative(e))
    }
    this._closing = this._closed
    return this._closing
  }

  /** Lets the process exit while the proxy runs (as `server.unref()`). Returns the proxy. */
  unref() {
    this._native.hold(false)
    return this
  }

  /** Keeps the process alive while the proxy runs again (the default). Returns the proxy. */
  ref() {
    this._native.hold(true)
    return this
  }

  /** `await using proxy = await startProxy(url)`: closes the proxy at the end of the scope. */
  async [asyncDispose]() {
    await this.close()
  }
}

/**
 * Starts a fencing RESP proxy for the service of `url` in this process, on the core's threads,
 * and resolves with its Proxy once it accepts connections (it never waits for discovery:
 * requests wait for a primary up to `holdMs`). Options: the proxy's own (see PROXY_OPTIONS:
 * `listen` 'IP:PORT' or 'unix:PATH', default '127.0.0.1:0'; `holdMs`, `maxClients`,
 * `idleTimeoutMs`, `maxRequestBytes`, `route` 'primary' | 'read', `lendCredentials`,
 * `allowRemote`, `unixMode`) and any client option (as Client.connect takes them, `addressMap`
 * in its text form). Rejects with ConfigError naming a bad key or value, or the bind's failure.
 * @param {string} url
 * @param {object} [options]
 * @returns {Promise<Proxy>}
 */
async function startProxy(url, options = {}) {
  if (typeof url !== 'string') throw new TypeError('url must be a string')
  if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
  const flat = proxyOptions(options)
  let proxy
  let resolveClosed
  const closed = new Promise((resolve) => {
    resolveClosed = resolve
  })
  // Called once, on the event loop, when a close has completed on the core's threads.
  const onClosed = () => {
    runningProxies.delete(proxy)
    resolveClosed()
  }
  let started
  try {
    started = native.startProxy(url, flat, onClosed)
  } catch (e) {
    throw fromNative(e)
  }
  proxy = new Proxy(started, closed)
  runningProxies.add(proxy)
  return proxy
}

module.exports = {
  Client,
  doctor,
  startProxy,
  Proxy,
  ...errors,
  AbortError,
  Subscription: pubsub.Subscription,
  Transaction,
  setLogger,
  LOG_LEVELS,
  EVENT_KINDS,
}
