'use strict'
// One sentinel-recovery Client per URL (and client options) for every ioredis instance of that
// URL in the process: each instance holds a lease, the Client closes when the last lease is
// released. The Client's events close the guarded sockets that a failover made unroutable.

const { Client } = require('./index.js')
const { closeIfUnroutable } = require('./adapter_socket.js')

/**
 * Events after which some guarded socket may no longer be routable: a promotion started
 * (fencing), the primary changed, the replica set changed (reads).
 */
const SWEEP_KINDS = new Set(['failover_started', 'primary_changed', 'replicas_changed'])

/** Shared clients by key (URL + options). */
const shared = new Map()

/** A number per function option (e.g. an `addressMap` function), so keys tell them apart. */
const functionIds = new WeakMap()
let nextFunctionId = 1

/** The sharing key of `url` with client `options`: equal keys mean one Client. */
function keyOf(url, options) {
  const entries = Object.keys(options)
    .sort()
    .map((k) => {
      const v = options[k]
      if (typeof v !== 'function') return [k, v]
      if (!functionIds.has(v)) functionIds.set(v, nextFunctionId++)
      return [k, { function: functionIds.get(v) }]
    })
  return JSON.stringify([url, entries])
}

class SharedClient {
  constructor(key, url, options) {
    this.key = key
    /** Throws ConfigError for a bad URL or option (the message never holds a password). */
    this.client = Client.open(url, options)
    this.leases = 0
    /** Guarded sockets of every ioredis instance on this client. */
    this.sockets = new Set()
    this.client.on('event', (event) => {
      if (SWEEP_KINDS.has(event.kind)) this.sweep()
    })
  }

  /** Closes every socket whose node no longer takes its traffic (ioredis then reconnects). */
  sweep() {
    for (const socket of this.sockets) closeIfUnroutable(socket, this.client)
  }

  track(socket) {
    this.sockets.add(socket)
    socket.once('close', () => this.sockets.delete(socket))
  }
}

/**
 * A lease on the shared Client of `url` + `options`: `{shared, release()}`. `release` is
 * idempotent; the Client closes with its last lease.
 */
function acquire(url, options) {
  const key = keyOf(url, options)
  let entry = shared.get(key)
  if (entry === undefined) {
    entry = new SharedClient(key, url, options)
    shared.set(key, entry)
  }
  entry.leases++
  let released = false
  return {
    shared: entry,
    release() {
      if (released) return
      released = true
      if (--entry.leases === 0) {
        if (shared.get(key) === entry) shared.delete(key)
        entry.client.close().catch(() => {})
      }
    },
  }
}

/** How many shared Clients are open (for tests). */
function sharedClientCount() {
  return shared.size
}

module.exports = { acquire, sharedClientCount }
