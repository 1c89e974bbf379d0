'use strict'
/** doctor(): a diagnosis of a deployment, run on the core's threads. */

const native = require('./native.js')
const { makeError, fromNative } = require('./errors_by_code.js')
const { abortError, optionalSignal } = require('./abort.js')
const { coreOptions, mapFunction } = require('./options.js')

/** The message of a doctor() whose AbortSignal fired. */
const DOCTOR_ABORTED = 'The diagnosis was aborted'

/**
 * Diagnoses the deployment of `url` (what `sentinel-recovery doctor` does) on the core's threads
 * and resolves with the report: `{status, exitCode, headline, findings, report, json, text}`.
 * `options` are a client's (camelCase or snake_case, `addressMap` as text or function) plus
 * `watchMs` (sample a PING every 100 ms per sentinel for that long; more than 0, at most
 * 3600000) and `pings` (per sentinel, 1 to 1000, default 10). Rejects only when no diagnosis is
 * possible (a ConfigError for a bad URL or option, or one of these out of range); every problem
 * of the deployment is in the report. `options.signal` (an AbortSignal) stops the diagnosis:
 * the promise rejects at once with an AbortError.
 * @param {string} url
 * @param {object} [options]
 */
function doctor(url, options = {}) {
  return new Promise((resolve, reject) => {
    if (typeof url !== 'string') throw new TypeError('url must be a string')
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
    const { watchMs, pings, signal, ...rest } = options
    if (optionalSignal({ signal })?.aborted) throw abortError(signal, DOCTOR_ABORTED)
    let onAbort
    const done = (text) => {
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
      const r = JSON.parse(text)
      if (!r.ok) return reject(makeError(r.code, r.message, null))
      const report = JSON.parse(r.json)
      resolve({
        status: r.status,
        exitCode: r.exitCode,
        headline: report.verdict.headline,
        findings: report.findings,
        report,
        json: r.json,
        text: r.text,
      })
    }
    let operation
    try {
      operation = native.doctor(url, coreOptions(rest), watchMs ?? undefined, pings ?? undefined, mapFunction(rest), done)
    } catch (e) {
      return reject(fromNative(e))
    }
    if (signal !== undefined) {
      // The core then completes the diagnosis with `closed`, which settles nothing any more.
      onAbort = () => {
        operation.cancel()
        reject(abortError(signal, DOCTOR_ABORTED))
      }
      signal.addEventListener('abort', onAbort, { once: true })
    }
  })
}

module.exports = { doctor }
