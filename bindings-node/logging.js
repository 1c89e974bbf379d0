'use strict'
/** The core's log records, handed to the function given to setLogger() on the event loop. */

const native = require('./native.js')
const { makeError } = require('./errors_by_code.js')

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

module.exports = { LOG_LEVELS, setLogger }
