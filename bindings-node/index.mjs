// ESM entry point: the CommonJS module re-exported.
import cjs from './index.js'

export const {
  Client,
  doctor,
  startProxy,
  Proxy,
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
  NotReplicatedError,
  AbortError,
  Subscription,
  Transaction,
  setLogger,
  LOG_LEVELS,
  ERROR_CLASSES,
  EVENT_KINDS,
} = cjs
export default cjs
