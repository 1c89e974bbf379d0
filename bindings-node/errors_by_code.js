'use strict'
/**
 * The error factories every module uses, over the generated error classes (errors.js): a stable
 * code and message as its SentinelRecoveryError subclass, and an error thrown by the native
 * module as its class.
 */

const { SentinelRecoveryError, ERROR_CLASSES } = require('./errors.js')

/** The SentinelRecoveryError subclass of `code`, with the server's first word for server errors. */
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

/** Whether `e` is a SentinelRecoveryError. */
function isPackageError(e) {
  return e instanceof SentinelRecoveryError
}

module.exports = { makeError, fromNative, isPackageError }
