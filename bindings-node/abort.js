'use strict'
/**
 * Ending operations early: AbortSignal support (AbortError and the checks of a `signal` option)
 * and the symbol `await using` calls.
 */

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

/** `options.signal` checked: undefined or an AbortSignal, else a TypeError is thrown. */
function optionalSignal(options) {
  const signal = options?.signal ?? undefined
  if (signal !== undefined && !isAbortSignal(signal)) throw new TypeError('signal must be an AbortSignal')
  return signal
}

/**
 * `Symbol.asyncDispose` where the runtime has it, else the well-known
 * `Symbol.for('nodejs.asyncDispose')` that TypeScript's `await using` and Node's own classes use.
 */
const asyncDispose = typeof Symbol.asyncDispose === 'symbol' ? Symbol.asyncDispose : Symbol.for('nodejs.asyncDispose')

module.exports = { AbortError, abortError, isAbortSignal, optionalSignal, asyncDispose }
