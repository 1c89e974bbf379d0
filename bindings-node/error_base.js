'use strict'
// The base class of every error of this package; the class of each code (errors.js) is generated
// from the core's table.

/** Base class of every error of this package; `code` is the stable code shared by all languages. */
class SentinelRecoveryError extends Error {
  /**
   * @param {string} message
   * @param {string} code
   * @param {string|null} [serverCode]
   */
  constructor(message, code, serverCode = null) {
    super(message)
    this.name = new.target.name
    /** The stable code (`config`, `timeout`, ...). */
    this.code = code
    /** For server errors: the first word of the server's reply (`ERR`, `READONLY`, ...). */
    this.serverCode = serverCode
  }
}

module.exports = { SentinelRecoveryError }
