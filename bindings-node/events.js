'use strict'
/** A client's events, emitted from the JSON the core sends with its completions. */

const { makeError } = require('./errors_by_code.js')

/** Emits the event `json` on `client` as `'event'` and under its kind. */
function emitEvent(client, json) {
  const event = JSON.parse(json)
  if (event.kind === 'discovery_failed' && event.error) {
    event.error = makeError(event.error.code, event.error.message, event.error.server_code)
  }
  try {
    client.emit('event', event)
    client.emit(event.kind, event)
  } catch (e) {
    // Like any emitter with no caller to throw to: an uncaught exception. The events and
    // completions after it are still delivered.
    process.nextTick(() => {
      throw e
    })
  }
}

module.exports = { emitEvent }
