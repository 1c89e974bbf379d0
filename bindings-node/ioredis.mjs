// ESM entry point of sentinel-recovery/ioredis: the CommonJS module re-exported.
import cjs from './ioredis.js'

export const { createIORedis, SentinelRecoveryConnector, DEFAULTS } = cjs
export default cjs
