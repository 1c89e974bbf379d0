'use strict'
/** Transactions begun with `client.beginTransaction()`: steps on the core's NativeTransaction. */

const { checkArgs, checkCommands } = require('./arguments.js')
const { asyncDispose } = require('./abort.js')

/**
 * A transaction begun with `client.beginTransaction()`, on a dedicated connection to the primary
 * it began on. `exec` ends it; `discard()` (or leaving an `await using` scope) ends it without
 * running anything, and so does letting go of it. `exec` rejects with ConnectionLostError
 * ("nothing was applied") when the primary changed since the transaction began: begin again on
 * the new primary.
 */
class Transaction {
  /** @private Use client.beginTransaction(). */
  constructor(client, nativeTx, primary) {
    this._client = client
    this._native = nativeTx
    /** The primary (`host:port`) the transaction runs on. */
    this.primary = primary
  }

  /** `WATCH keys...`: `exec` then resolves with `null` if any of them changed. */
  watch(...keys) {
    const checked = checkArgs(keys, 'watch')
    if (checked instanceof Error) return Promise.reject(checked)
    return this._client._op((op) => this._native.watch(op, checked))
  }

  /** Runs one command now on the transaction's connection (a read between WATCH and EXEC). */
  execute(args) {
    const checked = checkArgs(args, 'execute')
    if (checked instanceof Error) return Promise.reject(checked)
    return this._client._op((op) => this._native.execute(op, checked))
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
    return this._client._op((op) => this._native.exec(op, checked))
  }

  /** Ends the transaction without running anything. Idempotent. */
  discard() {
    this._native.discard()
  }

  /** `await using`: discards the transaction unless `exec` ran. */
  async [asyncDispose]() {
    this.discard()
  }
}

module.exports = { Transaction }
