'use strict'
/**
 * Options as the core takes them: a client's options object becomes a flat `[key, value, ...]`
 * list of the core's snake_case keys and strings, which the core checks (its errors name the key).
 * Per-call options (`{timeoutMs, signal}`) are checked here.
 */

const { isAbortSignal } = require('./abort.js')

/** `decodeResponses` -> `decode_responses`; snake_case keys are kept as they are. */
function snakeCase(key) {
  return key.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())
}

/** Options object -> flat [key, value, ...] of core keys and strings. */
function coreOptions(options) {
  const flat = []
  for (const [key, value] of Object.entries(options)) {
    if (key === 'decodeResponses' || key === 'decode_responses' || value === undefined) continue
    if (typeof value === 'function' && snakeCase(key) === 'address_map') continue // mapFunction()
    flat.push(snakeCase(key), value === null ? '' : String(value))
  }
  return flat
}

/**
 * The function form of `addressMap` wrapped for the native side: it gets the reported address as
 * JSON text and returns JSON text (`{host, port}`, `{error}` when the function threw) or null,
 * so nothing JavaScript throws crosses into the core. `undefined` without a function.
 */
function mapFunction(options) {
  const fn = options.addressMap ?? options.address_map
  if (typeof fn !== 'function') return undefined
  return (reported) => {
    try {
      const mapped = fn(JSON.parse(reported))
      if (mapped == null) return null
      return JSON.stringify({ host: mapped.host, port: mapped.port })
    } catch (e) {
      return JSON.stringify({ error: String((e && e.message) || e) })
    }
  }
}

/** `{timeoutMs, signal}` checked, or an Error. */
function callOptions(options, what) {
  let timeoutMs
  let signal
  if (options === undefined) return { timeoutMs, signal }
  if (options === null || typeof options !== 'object') {
    return new TypeError(`${what} options must be an object`)
  }
  for (const key of Object.keys(options)) {
    if (key !== 'timeoutMs' && key !== 'signal') {
      return new TypeError(`unknown ${what} option '${key}' (expected timeoutMs, signal)`)
    }
  }
  timeoutMs = options.timeoutMs ?? undefined
  signal = options.signal ?? undefined
  // Its range is the core's rule (every binding's): the native call refuses with `config`.
  if (timeoutMs !== undefined && typeof timeoutMs !== 'number') {
    return new TypeError(`timeoutMs must be a number of milliseconds, not ${typeof timeoutMs}`)
  }
  if (signal !== undefined && !isAbortSignal(signal)) {
    return new TypeError('signal must be an AbortSignal')
  }
  return { timeoutMs, signal }
}

module.exports = { snakeCase, coreOptions, mapFunction, callOptions }
