// ESM entry point: the CommonJS module re-exported (the error classes through errors.mjs,
// generated from the core's table).
import cjs from './index.js'

export * from './errors.mjs'

export const {
  Client,
  doctor,
  startProxy,
  Proxy,
  AbortError,
  Subscription,
  Transaction,
  setLogger,
  LOG_LEVELS,
  EVENT_KINDS,
} = cjs
export default cjs
