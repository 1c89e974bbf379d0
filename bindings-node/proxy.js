'use strict'
/** startProxy(): the fencing RESP proxy in this process, on the core's threads. */

const native = require('./native.js')
const { fromNative } = require('./errors_by_code.js')
const { asyncDispose } = require('./abort.js')
const { snakeCase } = require('./options.js')

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

module.exports = { Proxy, startProxy }
