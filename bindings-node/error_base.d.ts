// The base class of every error of this package; the class of each code (errors.d.ts) is
// generated from the core's table.
import type { ErrorCode } from './tables'

/** Base class of every error of this package. */
export declare class SentinelRecoveryError extends Error {
  constructor(message: string, code: ErrorCode, serverCode?: string | null)
  /** The stable code. */
  readonly code: ErrorCode
  /** For server errors (and server-refused auth): the first word of the reply (`ERR`, `READONLY`, ...). */
  readonly serverCode: string | null
}
