// ESM entry point: the CommonJS module re-exported.
import cjs from './index.js'

export const {
  Client,
  doctor,
  SentinelRecoveryError,
  ConfigError,
  SentinelsUnreachableError,
  ServiceUnknownError,
  NoHealthyPrimaryError,
  TimeoutError,
  ConnectionLostError,
  ServerError,
  ProtocolError,
  TlsError,
  AuthError,
  ClosedError,
  QueueFullError,
  InternalError,
  AbortError,
  ERROR_CLASSES,
  EVENT_KINDS,
} = cjs
export default cjs
