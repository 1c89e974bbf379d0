'use strict'
/**
 * sentinel-recovery for Node.js: a Promise client of a Redis/Valkey service managed by Sentinel.
 * Discovery, DNS and failover run on the Rust core's threads; commands are written and their
 * replies read on the event loop's thread without blocking. See index.d.ts for the API.
 *
 * This file exports the API: errors.js (generated) the error classes, client.js the Client,
 * completions.js how operations settle, transaction.js, pubsub.js, logging.js, doctor.js and
 * proxy.js the rest.
 */

const tables = require('./tables.js')
// The class of each error code and ERROR_CLASSES, generated from the core's table.
const errors = require('./errors.js')
const { Client } = require('./client.js')
const { Transaction } = require('./transaction.js')
const { Subscription } = require('./pubsub.js')
const { AbortError } = require('./abort.js')
const { setLogger, LOG_LEVELS } = require('./logging.js')
const { doctor } = require('./doctor.js')
const { Proxy, startProxy } = require('./proxy.js')

/** The event kinds (from the generated table), each also emitted under its own name. */
const EVENT_KINDS = Object.freeze(Object.keys(tables.EVENT_KINDS))

module.exports = {
  Client,
  doctor,
  startProxy,
  Proxy,
  ...errors,
  AbortError,
  Subscription,
  Transaction,
  setLogger,
  LOG_LEVELS,
  EVENT_KINDS,
}
