'use strict'
/**
 * sentinel-recovery/ioredis: keep ioredis (and BullMQ), let the core decide where its connections
 * go. `createIORedis(url, options)` returns an ioredis `Redis` whose `Connector` asks the core
 * for the ROLE-verified primary on every (re)connect, waits through a failover instead of
 * failing, and closes the connection to a primary that a failover starts demoting before
 * anything more is written to it or read from it. See README.md, "Keep your client: ioredis".
 *
 * ioredis is an optional peer dependency: it is loaded by createIORedis, never by the main entry.
 */

const { acquire } = require('./adapter_clients.js')
const { openSocket, guardSocket, ROUTE } = require('./adapter_socket.js')
const { ConfigError } = require('./index.js')

/**
 * ioredis's own message for a connection closed on purpose (lib/utils CONNECTION_CLOSED_ERROR_MSG):
 * ioredis stays quiet about it while it is disconnecting.
 */
const CONNECTION_CLOSED = 'Connection is closed.'

/**
 * Route errors that waiting cannot fix: connect() rejects with them, which ends the ioredis
 * client for good (its status becomes 'end'; `redis.connect()` starts it again). Every other
 * error (timeout, no primary, sentinels unreachable) means "keep waiting".
 */
const FATAL_CODES = new Set(['config', 'auth', 'tls', 'closed', 'internal'])

/** How long one route request waits before the connector asks again (it never gives up). */
const ROUTE_WAIT_MS = 10000
/** Pause after a route error that came back at once, or a refused connection: doubling, capped. */
const RETRY_MIN_MS = 50
const RETRY_MAX_MS = 1000

/** Options createIORedis sets unless the caller sets them; see README for what they trade. */
const DEFAULTS = Object.freeze({
  // A command in flight when the connection closed may have run on the old primary: never
  // re-send it (ioredis's default would, after the reconnect). It is rejected instead.
  autoResendUnfulfilledCommands: false,
  // Commands issued while disconnected were never sent: they wait for the new primary (ioredis
  // sends them once connected). Bound their wait with ioredis's `commandTimeout` if needed.
  enableOfflineQueue: true,
  // The connector waits for the primary itself, so ioredis's reconnect attempts don't pile up;
  // null lets queued commands wait for it (and is what BullMQ requires of its connections).
  maxRetriesPerRequest: null,
  // Connection hand-offs (MOVING) would move connections where the core did not send them.
  maintNotifications: 'disabled',
})

/** ioredis options that name where to connect: the URL does that here. */
const WHERE_OPTIONS = ['sentinels', 'name', 'host', 'port', 'path', 'Connector', 'sentinelRecovery']

const STOPPED = Symbol('stopped')

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function closedError() {
  return new Error(CONNECTION_CLOSED)
}

/** The role ioredis's `role` option gives: 'master' (default) or 'slave'. */
function wantsPrimary(role) {
  if (role === undefined || role === null || role === 'master') return true
  if (role === 'slave') return false
  throw new ConfigError(`ioredis option role must be 'master' or 'slave', not '${String(role)}'`, 'config')
}

/** Client options for a replica connection: `prefer-replica` unless the URL or options choose. */
function clientOptionsFor(url, clientOptions, primary) {
  const chosen = 'readFrom' in clientOptions || 'read_from' in clientOptions || /[?&]read_from=/.test(url)
  return primary || chosen ? clientOptions : { ...clientOptions, readFrom: 'prefer-replica' }
}

/** Releases the lease of a connector that was collected without its ioredis instance ending. */
const leases = new FinalizationRegistry((lease) => lease.release())

/**
 * An ioredis `Connector` (`new Redis({Connector: SentinelRecoveryConnector, sentinelRecovery:
 * {url, clientOptions}})`; createIORedis sets both). ioredis builds one per instance (also in
 * `duplicate()`) with the instance's options and calls `connect()` on every (re)connect.
 */
class SentinelRecoveryConnector {
  /** @param {object} options the ioredis instance's options */
  constructor(options) {
    const settings = options && options.sentinelRecovery
    if (settings === null || typeof settings !== 'object' || typeof settings.url !== 'string') {
      throw new TypeError(
        'SentinelRecoveryConnector needs the ioredis option sentinelRecovery: {url: "redis+sentinel://...", clientOptions?} (createIORedis sets it)',
      )
    }
    const clientOptions = settings.clientOptions ?? {}
    if (clientOptions === null || typeof clientOptions !== 'object') {
      throw new TypeError('sentinelRecovery.clientOptions must be an object')
    }
    this.options = options
    this.primary = wantsPrimary(options.role)
    this.url = settings.url
    this.clientOptions = clientOptionsFor(settings.url, clientOptions, this.primary)
    this.connecting = false
    this.stream = undefined
    this.lease = null
    this._stop = null
    // Opened now, so a bad URL or option throws from `new Redis(...)` / createIORedis.
    this._acquire()
  }

  /** The shared sentinel-recovery Client (topology, events; do not close it: ioredis does). */
  get client() {
    return this._acquire().shared.client
  }

  _acquire() {
    if (this.lease === null) {
      this.lease = acquire(this.url, this.clientOptions)
      leases.register(this, this.lease, this)
    }
    return this.lease
  }

  /** Lets go of the shared Client (it closes with its last user); connect() takes it again. */
  release() {
    if (this.lease === null) return
    leases.unregister(this)
    this.lease.release()
    this.lease = null
  }

  /**
   * Resolves with a connected socket to the node the core routes to. It never rejects for a
   * failover or a missing primary: it waits (ioredis queues new commands meanwhile); it rejects
   * only when disconnect() was called, or for what waiting cannot fix (ConfigError, AuthError,
   * TlsError, ClosedError, InternalError), and ioredis then ends the client.
   */
  async connect(_emit) {
    this.connecting = true
    const stop = {}
    stop.promise = new Promise((_, reject) => (stop.reject = reject))
    stop.promise.catch(() => {})
    this._stop = stop
    const until = (promise) => Promise.race([promise, stop.promise])
    const { shared } = this._acquire()
    const client = shared.client
    let pause = RETRY_MIN_MS
    const wait = async () => {
      await until(sleep(pause))
      pause = Math.min(pause * 2, RETRY_MAX_MS)
    }
    try {
      for (;;) {
        if (!this.connecting) throw STOPPED
        let address
        try {
          address = await until(client.route(this.primary, { timeoutMs: ROUTE_WAIT_MS }))
        } catch (e) {
          if (e === STOPPED || FATAL_CODES.has(e && e.code)) throw e
          if (e.code !== 'timeout') await wait()
          continue
        }
        const opening = openSocket(address, {
          timeoutMs: this.options.connectTimeout || 10000,
          family: this.options.family || undefined,
          tlsOptions: this.options.tls,
          noDelay: this.options.noDelay !== false,
        })
        let socket
        try {
          socket = await until(opening)
        } catch (e) {
          if (e === STOPPED) {
            opening.then((s) => s.destroy(), () => {})
            throw e
          }
          // Refused or timed out: the core's view may be stale; it rediscovers, calmly.
          reportUnusable(client, address)
          await wait()
          continue
        }
        // A failover may have begun while the connection was being opened.
        if (!this.connecting || !client.isRoutable(address.host, address.port, this.primary)) {
          socket.destroy()
          continue
        }
        // ioredis adds its own 'error' listener once it has the socket; until then (and for a
        // second error, which its once-listener would miss) an error must not be uncaught.
        socket.on('error', () => {})
        guardSocket(socket, client, { host: address.host, port: address.port, primary: this.primary })
        shared.track(socket)
        this.stream = socket
        return socket
      }
    } catch (e) {
      if (e === STOPPED) throw closedError()
      throw e
    } finally {
      if (this._stop === stop) this._stop = null
    }
  }

  /**
   * ioredis's ready check hands over the node's INFO (parsed; `{}` when INFO is not allowed): a
   * primary connection needs `role:master`, and every connection must still be routable for
   * the core. False makes ioredis drop the connection and reconnect through connect().
   */
  check(info) {
    const route = this.stream && this.stream[ROUTE]
    if (route === undefined) return false
    const roleOk = !this.primary || !info || !info.role || info.role === 'master'
    const ok = roleOk && this.client.isRoutable(route.host, route.port, this.primary)
    if (!ok) reportUnusable(this.client, route)
    return ok
  }

  /** Closes the connection (gracefully, destroyed after ioredis's disconnectTimeout). */
  disconnect() {
    this.connecting = false
    if (this._stop !== null) this._stop.reject(STOPPED)
    const stream = this.stream
    if (stream) {
      const timer = setTimeout(() => stream.destroy(), this.options.disconnectTimeout || 2000)
      stream.on('close', () => clearTimeout(timer))
      stream.end()
    }
  }
}

function reportUnusable(client, { host, port }) {
  try {
    client.reportUnusable(host, port)
  } catch {
    // A closed client has no one left to tell.
  }
}

/** The Redis subclass of each ioredis module (its duplicate() keeps the subclass). */
const redisClasses = new WeakMap()

function redisClass(Redis) {
  let Class = redisClasses.get(Redis)
  if (Class !== undefined) return Class
  Class = class SentinelRecoveryRedis extends Redis {
    constructor(...args) {
      super(...args)
      // The shared Client is let go when this instance ends (quit, disconnect); a later
      // connect() takes it again.
      const connector = this.connector
      if (connector instanceof SentinelRecoveryConnector) this.on('end', () => connector.release())
    }

    /** A new instance with the same options (BullMQ's blocking connections): same Client. */
    duplicate(override) {
      return new Class({ ...this.options, ...(override ?? {}) })
    }

    /** The shared sentinel-recovery Client: topology and events; ioredis closes it. */
    get sentinelRecoveryClient() {
      return this.connector.client
    }
  }
  redisClasses.set(Redis, Class)
  return Class
}

function loadIORedis() {
  try {
    return require('ioredis')
  } catch (e) {
    throw new Error('sentinel-recovery/ioredis needs the ioredis package: npm install ioredis', { cause: e })
  }
}

/**
 * An ioredis `Redis` for the service of `url` (`redis+sentinel://...`), connected through the
 * core. `options` are ioredis's, plus `role` ('primary' (default) or 'replica': reads from a
 * replica under `read_from`, prefer-replica unless the URL says otherwise) and `clientOptions`
 * (the sentinel-recovery Client's options, as for Client.open). Instances of one URL and
 * clientOptions share one Client, closed when the last of them ends.
 * @param {string} url
 * @param {object} [options]
 */
function createIORedis(url, options = {}) {
  if (typeof url !== 'string') throw new TypeError('createIORedis: url must be a string (redis+sentinel://...)')
  if (options === null || typeof options !== 'object') throw new TypeError('createIORedis: options must be an object')
  const { role = 'primary', clientOptions = {}, ...ioredisOptions } = options
  for (const key of WHERE_OPTIONS) {
    if (key in ioredisOptions) {
      throw new TypeError(`createIORedis: option '${key}' does not apply: the URL names the sentinels and the service`)
    }
  }
  if (!['primary', 'master', 'replica', 'slave'].includes(role)) {
    throw new ConfigError(`createIORedis: role must be 'primary' or 'replica', not '${String(role)}'`, 'config')
  }
  const Class = redisClass(loadIORedis())
  return new Class({
    ...DEFAULTS,
    ...ioredisOptions,
    role: role === 'primary' || role === 'master' ? 'master' : 'slave',
    Connector: SentinelRecoveryConnector,
    sentinelRecovery: { url, clientOptions },
  })
}

module.exports = { createIORedis, SentinelRecoveryConnector, DEFAULTS }
