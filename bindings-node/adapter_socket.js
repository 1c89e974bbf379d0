'use strict'
// Sockets that the ioredis adapter hands to ioredis: opened to the node the core routes to, and
// guarded so that nothing is written to, and no reply is taken from, a primary that a failover
// is demoting. The guards ask the core synchronously (no I/O) at the last moment JavaScript has:
// just before bytes are written and just before a chunk of replies reaches ioredis's parser. The
// core's own `failover_started` / `primary_changed` events also reach here (see
// adapter_clients.js), but later: they are queued to the event loop, while the core knows at once.

const net = require('node:net')
const tls = require('node:tls')

/** Where a guarded socket goes and what it carries: `{host, port, primary}`. */
const ROUTE = Symbol('sentinelRecoveryRoute')

/**
 * Opens a TCP (or, with `tlsOptions`, TLS) connection to `host:port` and resolves once it is
 * connected, so ioredis gets a ready stream; rejects on a connection error or after
 * `timeoutMs` (the socket is destroyed).
 */
function openSocket({ host, port }, { timeoutMs, family, tlsOptions, noDelay }) {
  return new Promise((resolve, reject) => {
    const socket = tlsOptions
      ? tls.connect({ ...tlsOptions, host, port, family })
      : net.connect({ host, port, family })
    const connected = tlsOptions ? 'secureConnect' : 'connect'
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`connect to ${host}:${port} timed out after ${timeoutMs} ms`))
    }, timeoutMs)
    const onError = (err) => {
      clearTimeout(timer)
      socket.destroy()
      reject(err)
    }
    socket.once('error', onError)
    socket.once(connected, () => {
      clearTimeout(timer)
      socket.removeListener('error', onError)
      if (noDelay) socket.setNoDelay(true)
      resolve(socket)
    })
  })
}

/** The `writable` accessor that net.Socket inherits (from Duplex / Writable). */
function writableAccessor(socket) {
  for (let p = Object.getPrototypeOf(socket); p !== null; p = Object.getPrototypeOf(p)) {
    const d = Object.getOwnPropertyDescriptor(p, 'writable')
    if (d !== undefined) return d
  }
  throw new Error('sentinel-recovery/ioredis: this Node.js socket has no writable accessor')
}

/**
 * Guards `socket`, a connection to `route.host:route.port` carrying writes (`route.primary`)
 * or reads, with the core `client`:
 * - before each command, ioredis reads `stream.writable` to choose between writing it and
 *   keeping it in its offline queue. Here `writable` first asks the core whether it still
 *   routes this kind of traffic to this node; if not, the socket is destroyed, so `writable`
 *   is false: the command stays in the offline queue (never sent), ioredis reconnects through
 *   the connector, which waits for the new primary, and sends it there. Commands already on the
 *   wire are rejected ("Command aborted due to connection close"; autoResendUnfulfilledCommands
 *   is off, as they may have run).
 * - `write` itself refuses the same way, for a writer that does not ask `writable` first.
 * - on a primary connection, a chunk of replies read once the core knows a failover is demoting
 *   (or has replaced) this node is not handed to ioredis: the socket is destroyed, so those
 *   commands fail as "aborted" instead of reporting success for writes the promotion may
 *   discard.
 * What this cannot cover: a reply that ioredis already parsed before the core learnt of the
 * promotion (the sentinel's `+failover-state-send-slaveof-noone`), and a command already on the
 * wire to the old primary, which may or may not have run there; neither is ever re-sent.
 */
function guardSocket(socket, client, route) {
  const { host, port, primary } = route
  socket[ROUTE] = route
  const epoch = routingEpoch(client)
  const routable = verdict(epoch, () => client.isRoutable(host, port, primary))
  const fenced = verdict(epoch, () => client.isFenced(host, port))
  const writable = writableAccessor(socket)
  Object.defineProperty(socket, 'writable', {
    configurable: true,
    enumerable: writable.enumerable,
    get() {
      if (!this.destroyed && !routable()) this.destroy()
      return writable.get.call(this)
    },
    set(value) {
      writable.set.call(this, value)
    },
  })
  const write = socket.write
  socket.write = function guardedWrite(chunk, encoding, callback) {
    if (!routable()) {
      socket.destroy()
      return false
    }
    return write.call(this, chunk, encoding, callback)
  }
  if (primary) {
    const emit = socket.emit
    socket.emit = function guardedEmit(event) {
      if (event === 'data' && fenced()) {
        socket.destroy()
        return false
      }
      return emit.apply(this, arguments)
    }
  }
  return socket
}

/** One live view of each client's routing counter (see `Client.routingEpoch`). */
const epochs = new WeakMap()

function routingEpoch(client) {
  let view = epochs.get(client)
  if (view === undefined) {
    view = client.routingEpoch()
    epochs.set(client, view)
  }
  return view
}

/**
 * `ask()` (a question to the core, a native call) answered again only when the core's routing
 * counter moved: the counter is bumped after every view the core publishes (a fence, a new
 * primary, a lost sentinel majority...), so an answer kept while it reads the same is the
 * answer the core would give now. The counter is read before asking, so an answer computed from
 * a newer view than the count it is filed under is only asked again, never kept too long.
 */
function verdict(epoch, ask) {
  let seen = -1
  let answer = false
  return () => {
    const now = epoch[0]
    if (now !== seen) {
      answer = ask()
      seen = now
    }
    return answer
  }
}

/** Destroys `socket` if the core no longer routes its traffic to its node; true if it did. */
function closeIfUnroutable(socket, client) {
  const route = socket[ROUTE]
  if (route === undefined || socket.destroyed) return false
  if (client.isRoutable(route.host, route.port, route.primary)) return false
  socket.destroy()
  return true
}

module.exports = { openSocket, guardSocket, closeIfUnroutable, ROUTE }
