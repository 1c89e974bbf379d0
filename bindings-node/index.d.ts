/// <reference types="node" />
/**
 * sentinel-recovery for Node.js: a Promise client of a Redis/Valkey service managed by Sentinel.
 * Discovery, DNS, failover and reconnects run on the Rust core's own threads; commands in flight
 * are written and read on the event loop's thread with non-blocking calls, never waiting there.
 */
import { EventEmitter } from 'node:events'

import type { EventKindName } from './tables'
import type { SentinelRecoveryError } from './errors'

/** The stable error codes shared by every language (generated from the core's table). */
export type { ErrorCode } from './tables'

// The error classes (one per code, generated from the core's table) and ERROR_CLASSES.
export * from './errors'

/**
 * Rejection of a command whose AbortSignal fired, as Node's own APIs reject. The command may have
 * been sent, and then may have run on the server; it is never retried.
 */
export declare class AbortError extends Error {
  constructor(message?: string, options?: { cause?: unknown })
  readonly name: 'AbortError'
  readonly code: 'ABORT_ERR'
  /** The signal's `reason`. */
  readonly cause: unknown
}

/**
 * A node address: where the client connects. `announced` is set only when `addressMap` mapped
 * the address a sentinel reported (kept there) to this one.
 */
export interface Address {
  host: string
  port: number
  announced?: { host: string; port: number }
}

/**
 * `addressMap`'s function form, like ioredis' `natMap`: called with each address a sentinel
 * reports (primary, replicas, other sentinels; never the sentinels of the URL); return the
 * address to connect to instead, or null/undefined to use it as reported. It runs on the
 * JavaScript thread while a core thread waits for its answer (at most 1 s; after that, or if it
 * throws, the reported address is used and a warning is logged): keep it quick and synchronous.
 */
export type AddressMapFunction = (reported: { host: string; port: number }) =>
  | { host: string; port: number }
  | null
  | undefined

/** One sentinel as the client knows it. */
export interface SentinelInfo extends Address {
  /** Whether the last attempt to ask it succeeded. */
  up: boolean
  /** Whether it is in TILT: it answers, but its view may be stale. */
  tilt: boolean
  /** Whether it monitors the service (`false` once it answered that it does not). */
  knows_service: boolean
}

/** A point-in-time view of the service. */
export interface Topology {
  service: string
  /** The verified primary, or null before the first successful discovery. */
  primary: Address | null
  replicas: Address[]
  sentinels: SentinelInfo[]
  epoch: number
  /** True when the last discovery round found and verified the primary. */
  healthy: boolean
}

/** Fields every event carries. */
interface EventBase {
  service: string
  /** Unix time in milliseconds. */
  at: number
}
export interface PrimaryChangedEvent extends EventBase {
  kind: 'primary_changed'
  old: Address | null
  new: Address
}
export interface ReplicasChangedEvent extends EventBase {
  kind: 'replicas_changed'
  replicas: Address[]
}
export interface SentinelsChangedEvent extends EventBase {
  kind: 'sentinels_changed'
  sentinels: SentinelInfo[]
}
export interface SentinelDownEvent extends EventBase {
  kind: 'sentinel_down'
  sentinel: Address
}
export interface SentinelUpEvent extends EventBase {
  kind: 'sentinel_up'
  sentinel: Address
}
export interface ConnectionLostEvent extends EventBase {
  kind: 'connection_lost'
  address: Address
}
export interface ConnectionRestoredEvent extends EventBase {
  kind: 'connection_restored'
  address: Address
}
export interface DiscoveryFailedEvent extends EventBase {
  kind: 'discovery_failed'
  /** SentinelsUnreachableError, ServiceUnknownError or NoHealthyPrimaryError. */
  error: SentinelRecoveryError
}
export interface FailoverStartedEvent extends EventBase {
  kind: 'failover_started'
  /** The primary being demoted. */
  primary: Address
  /** The replica being promoted; writes wait until it answers as primary. */
  promoting: Address
}
export interface SentinelTiltEvent extends EventBase {
  kind: 'sentinel_tilt'
  sentinel: Address
  /** True when the sentinel entered TILT, false when it left. */
  on: boolean
}
export interface SentinelServiceUnknownEvent extends EventBase {
  kind: 'sentinel_service_unknown'
  /** A reachable sentinel that answered that it does not monitor the service. */
  sentinel: Address
}
export interface SubscriptionLostEvent extends EventBase {
  kind: 'subscription_lost'
  /** The node a pub/sub subscription was on; messages are missed until `subscription_restored`. */
  address: Address
}
export interface SubscriptionRestoredEvent extends EventBase {
  kind: 'subscription_restored'
  /** The node the subscription is on now, with every channel and pattern subscribed again. */
  address: Address
  /** How long (ms) the subscription was lost: what was published then was not received. */
  gap_ms: number
}
/** With `sentinelMajorityMs`: fewer than a majority of the known sentinels answered in time; writes wait. */
export interface SentinelMajorityLostEvent extends EventBase {
  kind: 'sentinel_majority_lost'
  /** Sentinels heard within the bound. */
  heard: number
  /** Sentinels known. */
  known: number
}
/** With `sentinelMajorityMs`: a majority of the sentinels name the primary again; writes resume. */
export interface SentinelMajorityRegainedEvent extends EventBase {
  kind: 'sentinel_majority_regained'
  /** The primary they name. */
  primary: Address
  /** Sentinels that named it within the bound. */
  confirmed: number
  /** Sentinels known. */
  known: number
}
/** Any event. */
export type SentinelEvent =
  | PrimaryChangedEvent
  | ReplicasChangedEvent
  | SentinelsChangedEvent
  | SentinelDownEvent
  | SentinelUpEvent
  | ConnectionLostEvent
  | ConnectionRestoredEvent
  | DiscoveryFailedEvent
  | FailoverStartedEvent
  | SentinelTiltEvent
  | SentinelServiceUnknownEvent
  | SubscriptionLostEvent
  | SubscriptionRestoredEvent
  | SentinelMajorityLostEvent
  | SentinelMajorityRegainedEvent
/** The event kinds (generated from the core's table). */
export type EventKind = EventKindName
/** The event of one kind (`never` for a kind newer than these declarations). */
export type EventOf<K extends EventKind> = Extract<SentinelEvent, { kind: K }>
/** Every event kind, in the order of the core's table. */
export declare const EVENT_KINDS: readonly EventKind[]

/**
 * Options; every key except `decodeResponses` is a core option, passed as a string to the core,
 * which checks it (camelCase keys are turned into the core's snake_case: `commandTimeoutMs` is
 * `command_timeout_ms`). The same keys work in the URL query.
 */
export interface ClientOptions {
  /**
   * Return strings instead of Buffers for bulk replies that are valid UTF-8. Default false. A
   * small Buffer reply (up to 4 KiB) may be a view of an ArrayBuffer shared with other replies,
   * as Node's own small Buffers share a pool: use `byteOffset` and `length` with its `buffer`.
   */
  decodeResponses?: boolean
  db?: number
  clientName?: string
  protocol?: 2 | 3
  connectTimeoutMs?: number
  commandTimeoutMs?: number
  sentinelTimeoutMs?: number
  checkIntervalMs?: number
  retryBaseMs?: number
  retryMaxMs?: number
  dnsTimeoutMs?: number
  dnsServer?: string
  queueSize?: number
  readFrom?: 'primary' | 'prefer-replica' | 'replica'
  username?: string
  password?: string
  sentinelUser?: string
  sentinelPassword?: string
  tls?: boolean
  sentinelTls?: boolean
  dataTls?: boolean
  tlsInsecure?: boolean
  tlsCaFile?: string
  tlsCertFile?: string
  tlsKeyFile?: string
  sentinelTlsCaFile?: string
  sentinelTlsCertFile?: string
  sentinelTlsKeyFile?: string
  tlsServerName?: string
  /**
   * Where to connect instead of what sentinels report: `'10.0.0.5:6379>127.0.0.1:16379,...'`,
   * or a function (see AddressMapFunction).
   */
  addressMap?: string | AddressMapFunction
  /** Any other core key, in snake_case or camelCase. */
  [key: string]: string | number | boolean | null | undefined | AddressMapFunction
}

/** The named keys of `T`, without its index signature (which `signal` would not fit). */
type NamedKeys<T> = { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] }

/** Options of doctor(): a client's options plus the diagnosis' own. */
export interface DoctorOptions extends NamedKeys<ClientOptions> {
  /** Sample a PING every 100 ms to each sentinel for this long (more than 0, at most 3600000),
   * to see loop stalls; out of range, doctor() rejects with ConfigError. */
  watchMs?: number
  /** PINGs per sentinel for the round-trip figures: a whole number from 1 to 1000. Default 10. */
  pings?: number
  /** Stops the diagnosis: the promise rejects at once with an AbortError. */
  signal?: AbortSignal
  /** Any other core key, in snake_case or camelCase. */
  [key: string]: ClientOptions[string] | AbortSignal
}

/** One finding of a diagnosis. */
export interface DoctorFinding {
  severity: 'warning' | 'failure'
  /** `loop_stall`, `name_resolution`, `quorum`, `disagreement`, ... */
  mode: string
  /** Stable id: `sentinel_tilt`, `address_unreachable`, ... */
  code: string
  /** The endpoint concerned (`host:port`), if any. */
  subject: string | null
  /** What was found, with the numbers that prove it. */
  message: string
  /** One line: what to do. */
  hint: string
}

/** A finished diagnosis. */
export interface DoctorReport {
  /** The verdict (exit code 0, 1, 2 of the CLI). */
  status: 'healthy' | 'warning' | 'failure'
  exitCode: 0 | 1 | 2
  /** The title of the first failure mode, or 'healthy'. */
  headline: string
  /** What is wrong or at risk, most consequential first. */
  findings: DoctorFinding[]
  /**
   * The whole report (schema 1, as `sentinel-recovery doctor --json` prints it): `verdict`,
   * `findings`, `sentinels`, `agreement`, `quorum`, `names`, `data_nodes`, `timing`, ...
   */
  report: { schema: 1; service: string; verdict: { status: string; exit_code: number; headline: string; modes: string[] }; [key: string]: unknown }
  /** The report as JSON text. */
  json: string
  /** The human form, as the CLI prints it. */
  text: string
}

/**
 * Diagnoses the deployment of `url` (`sentinel-recovery doctor`) on the core's threads. Rejects
 * only when no diagnosis is possible (ConfigError for a bad URL or option), or with an
 * AbortError when `options.signal` fires.
 */
export declare function doctor(url: string, options?: DoctorOptions): Promise<DoctorReport>

/**
 * Options of startProxy(): the proxy's own, and any client option (a client option here is
 * what it is for Client.connect; `addressMap` only in its text form).
 */
export interface ProxyOptions extends Omit<NamedKeys<ClientOptions>, 'decodeResponses' | 'addressMap'> {
  /** `'IP:PORT'` (an IP literal; port 0 picks a free one) or `'unix:PATH'`. Default `'127.0.0.1:0'`. */
  listen?: string
  /**
   * How long a request may wait for a primary (a promotion under way, none known yet) before
   * it is answered `FENCED` without being sent. Default the client's `commandTimeoutMs`.
   */
  holdMs?: number
  /** Most client connections at once; past it Redis' own `max number of clients reached`. Default 10000. */
  maxClients?: number
  /** Closes a session idle this long (0 or absent: never, as Redis' `timeout 0`). */
  idleTimeoutMs?: number
  /** Largest request accepted, as the server's `proto-max-bulk-len` (at least 1024). Default 512 MiB. */
  maxRequestBytes?: number
  /** `'primary'` (default): sessions go to the verified primary; `'read'`: where `readFrom` sends reads. */
  route?: 'primary' | 'read'
  /** Authenticates clients that did not with the URL's data-node credentials (loopback or Unix only). */
  lendCredentials?: boolean
  /** Allows a `listen` address that is not loopback (exposes the primary beyond this host). */
  allowRemote?: boolean
  /** The Unix socket's file mode: a number (`0o600`, the default) or octal text (`'600'`). */
  unixMode?: number | string
  /** Where to connect instead of what sentinels report: `'10.0.0.5:6379>127.0.0.1:16379,...'`. */
  addressMap?: string
  /** Any other core key, in snake_case or camelCase. */
  [key: string]: string | number | boolean | null | undefined
}

/** A proxy's counters (the names every language and the CLI's metrics use). */
export interface ProxyStats {
  /** Client connections open now. */
  sessions_open: number
  /** Client connections accepted since the start. */
  sessions_accepted: number
  /** Client connections refused with `max number of clients reached`. */
  sessions_refused: number
  /** Requests written to a data node. */
  commands_forwarded: number
  /** Requests that had to wait for a primary (a promotion under way, no primary yet). */
  commands_held: number
  /** Time those requests waited, summed, in seconds. */
  held_seconds: number
  /** Held requests answered `FENCED` because no primary came within `holdMs`. */
  held_expired: number
  /** Replies read from a primary being demoted that were turned into `UNCERTAIN` errors. */
  fenced_replies: number
  /** Writes answered `NOTREPLICATED` (`waitReplicas`). */
  not_replicated: number
  /** Sessions moved to a new primary with their state replayed. */
  moves: number
  /** Sessions closed at a move because their state could not follow (MONITOR, CLIENT TRACKING, ...). */
  sessions_closed_at_move: number
  /** `primary_changed` events seen. */
  primary_changes: number
  /** Upstream connections that failed to open or broke. */
  upstream_errors: number
  /** Client connections closed for malformed or oversized requests. */
  malformed_requests: number
}

/**
 * A fencing RESP proxy running in this process, on the core's threads: any Redis client pointed
 * at `url` (or `path`) as if at one standalone Redis follows the primary through failovers. A
 * reply to a write read from a primary being demoted is an error reply beginning `UNCERTAIN`
 * (it may or may not have been applied), a request held past `holdMs` one beginning `FENCED`
 * (not sent); nothing is ever re-sent. Keeps the process alive until closed, as a listening
 * server does (`unref()`).
 */
export declare class Proxy {
  private constructor()
  /** Where it listens: `IP:PORT` (`[IP]:PORT` for IPv6) or `unix:PATH`. */
  readonly address: string
  /** The listening IP (TCP only). */
  readonly host?: string
  /** The listening port (TCP only). */
  readonly port?: number
  /** The Unix socket's path (Unix socket only). */
  readonly path?: string
  /**
   * `redis://IP:PORT`, as ioredis (`new Redis(proxy.url)`) and node-redis
   * (`createClient({ url: proxy.url })`) take it; `unix://PATH` on a Unix socket (give those
   * two the `path` instead).
   */
  readonly url: string
  /** Whether close() was called. */
  readonly closed: boolean
  /** The counters now. Throws ClosedError once close() was called. */
  stats(): ProxyStats
  /**
   * Stops accepting, lets replies in flight finish within `graceMs` (default 5000; 0: at once),
   * closes every session and the proxy's client; resolves when done, never blocking the event
   * loop. Idempotent (a later call gets the first one's promise). A `graceMs` out of range
   * (0 to 2147483647) rejects with ConfigError, nothing closed.
   */
  close(options?: { graceMs?: number }): Promise<void>
  /** Lets the process exit while the proxy runs. */
  unref(): this
  /** Keeps the process alive while the proxy runs (the default). */
  ref(): this
  /** `await using proxy = await startProxy(url)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * Starts a fencing proxy for the service of `url` in this process and resolves with it once it
 * accepts connections; it never waits for discovery (requests wait for a primary up to
 * `holdMs`). Rejects with ConfigError naming a bad key or value (the core's snake_case key,
 * `hold_ms` for `holdMs`), or the bind's failure.
 */
export declare function startProxy(url: string, options?: ProxyOptions): Promise<Proxy>

/**
 * A command argument. Strings are sent as UTF-8; one with a lone surrogate is refused with a
 * ConfigError. Bigints and integral numbers are sent in decimal, +/-Infinity as `inf` / `-inf`,
 * other numbers as their shortest round-trip text; NaN is refused with a ConfigError.
 */
export type Arg = string | Buffer | Uint8Array | number | bigint

/**
 * A reply: null, number (bigint beyond 2^53 and for RESP3 big numbers), boolean, Buffer (string
 * with `decodeResponses`) for bulk and verbatim strings, string for status replies, arrays for
 * arrays/sets/pushes, Map for RESP3 maps, ServerError for an error nested in an aggregate.
 */
export type Reply =
  | null
  | number
  | bigint
  | boolean
  | string
  | Buffer
  | SentinelRecoveryError
  | Reply[]
  | Map<Reply, Reply>

/** Per-call options of `execute` and `pipeline` (for a pipeline, the deadline of all of it). */
export interface ExecuteOptions {
  /**
   * This command's deadline in milliseconds, instead of the client's `commandTimeoutMs`
   * (positive, at most 2147483647); past it the promise rejects with TimeoutError.
   */
  timeoutMs?: number
  /**
   * Cancels the command: the promise rejects at once with an AbortError. A command already sent
   * may still run on the server.
   */
  signal?: AbortSignal
}

/** One pub/sub message: Buffers, or strings with `decodeResponses`. */
export interface Message {
  /** The channel it was published to. */
  channel: Buffer | string
  /** The payload. */
  message: Buffer | string
  /** The pattern it matched (`psubscribe`), or null for a channel subscription. */
  pattern: Buffer | string | null
}

/** Options of `subscribe` / `psubscribe`. */
export interface SubscribeOptions {
  /** Patterns to subscribe too (`subscribe` only). */
  patterns?: Array<string | Buffer>
  /**
   * Messages that may wait while nobody reads them (default 4096); beyond that the newest are
   * dropped and counted in `dropped`.
   */
  buffer?: number
  /**
   * Cancels the wait for the node's confirmation: the promise rejects at once with an
   * AbortError, and no subscription is left open. (The wait is bounded by the client's
   * `commandTimeoutMs`; there is no per-call deadline.)
   */
  signal?: AbortSignal
}

/** Listener signatures of Subscription. */
export type SubscriptionEvents = {
  message: (message: Message) => void
  end: () => void
  error: (error: Error) => void
}

/**
 * A pub/sub subscription on a connection of the core's own that follows failovers: after a lost
 * connection or a failover every channel and pattern is subscribed again on the new node, and the
 * client emits `subscription_lost` then `subscription_restored` (with `gap_ms`). Redis pub/sub is
 * at-most-once: what is published during the gap is not received. Emits `'message'`, and is an
 * async iterable of the same messages (`for await (const m of sub)`); ends (`'end'`) when it or
 * its client is closed. Messages are read only while someone listens.
 */
export declare class Subscription extends EventEmitter implements AsyncIterable<Message> {
  private constructor()
  /** Messages dropped because the buffer was full (the newest are dropped). */
  readonly dropped: number
  /** The channels subscribed now. */
  readonly channels: string[]
  /** The patterns subscribed now. */
  readonly patterns: string[]
  /** Whether the subscription ended. */
  readonly closed: boolean
  /** Adds channels; resolves once the node confirmed them. */
  subscribe(channels: Array<string | Buffer>): Promise<void>
  /** Adds glob-style patterns. */
  psubscribe(patterns: Array<string | Buffer>): Promise<void>
  /** Removes channels (no message of theirs after it resolves); without argument, close(). */
  unsubscribe(channels?: Array<string | Buffer>): Promise<void>
  /** Removes patterns. */
  punsubscribe(patterns: Array<string | Buffer>): Promise<void>
  /** Ends the subscription; its connection closes. */
  close(): Promise<void>
  [Symbol.asyncIterator](): AsyncIterator<Message>

  on<K extends keyof SubscriptionEvents>(event: K, listener: SubscriptionEvents[K]): this
  once<K extends keyof SubscriptionEvents>(event: K, listener: SubscriptionEvents[K]): this
  off<K extends keyof SubscriptionEvents>(event: K, listener: SubscriptionEvents[K]): this
}

/** Listener signatures of Client: `'event'` and every kind of the core's table. */
export type ClientEvents = {
  event: (event: SentinelEvent) => void
} & {
  [K in EventKind]: (event: EventOf<K>) => void
}

/**
 * A client of one Sentinel-managed service. Emits `'event'` with every event and each event
 * under its kind too, from the first discovery on: the first `primary_changed` has `old: null`,
 * also when another client in the process had already found the primary. Events do not keep the
 * process alive; pending commands do.
 */
export declare class Client extends EventEmitter {
  private constructor(url: string, options?: ClientOptions)
  /**
   * Opens a client and waits for the first discovery round; rejects (and closes the client) with
   * SentinelsUnreachableError, ServiceUnknownError or NoHealthyPrimaryError if it finds no primary,
   * ConfigError for a bad URL or option.
   */
  static connect(url: string, options?: ClientOptions): Promise<Client>
  /** Opens a client without waiting for discovery; throws ConfigError for a bad URL or option. */
  static open(url: string, options?: ClientOptions): Client
  /**
   * Runs one command: `await client.execute(['SET', 'k', 'v'])`, optionally with its own
   * deadline and an AbortSignal: `execute(['GET', 'k'], { timeoutMs: 500, signal })`.
   */
  execute(args: Arg[], options?: ExecuteOptions): Promise<Reply>
  /**
   * Subscribes to `channels` (and `options.patterns`) and resolves with a Subscription once the
   * node confirmed them: `const sub = await client.subscribe(['news'])`.
   */
  subscribe(channels: Array<string | Buffer>, options?: SubscribeOptions): Promise<Subscription>
  /** Subscribes to glob-style `patterns`. */
  psubscribe(patterns: Array<string | Buffer>, options?: Omit<SubscribeOptions, 'patterns'>): Promise<Subscription>
  /**
   * Sends commands back to back on one connection; resolves with one result per command, in
   * order: its reply, or its own error object (e.g. ServerError for WRONGTYPE) in its place. Not
   * atomic. Rejects only when it failed as a whole (no primary by the deadline; a command a
   * pipeline can't carry, such as BLPOP or MULTI: ConfigError, nothing sent).
   */
  pipeline(commands: Arg[][], options?: ExecuteOptions): Promise<Array<Reply | SentinelRecoveryError>>
  /**
   * MULTI ... EXEC on a dedicated connection to the primary, after `WATCH ...watch` when given:
   * one reply per command (a command failing inside EXEC is an error object in its place), or
   * `null` when a watched key changed (nothing ran). Rejects with ConnectionLostError ("nothing
   * was applied") when the primary changed meanwhile. `timeoutMs` (the rule of `execute`'s;
   * default `commandTimeoutMs`) bounds the whole transaction, from the call until EXEC's reply:
   * past it TimeoutError, and the dedicated connection is closed (an EXEC sent but not answered
   * in time may or may not have been applied). `signal` cancels it (AbortError; an EXEC
   * already sent may have run, nothing is retried).
   */
  transaction(
    commands: Arg[][],
    options?: { watch?: Arg[]; signal?: AbortSignal; timeoutMs?: number },
  ): Promise<Reply[] | null>
  /**
   * Begins a transaction (to read watched keys before EXEC); see `Transaction`. `timeoutMs`
   * bounds the whole transaction, from this call until `exec` completes: a step out of time
   * rejects with TimeoutError and ends it (later steps: ConfigError, "the transaction has
   * ended"). Without it each step gets `commandTimeoutMs` of its own.
   */
  beginTransaction(options?: { timeoutMs?: number }): Promise<Transaction>
  /** `await using client = await Client.connect(url)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>
  /** The current topology snapshot; never waits on the network. Throws ClosedError once closed. */
  topology(): Topology
  /**
   * For adapters that open connections of another library (`sentinel-recovery/ioredis`): the
   * node such a connection should go to. `primary` (default true): the ROLE-verified primary,
   * never one a failover is demoting (waits through a promotion and while no primary is known,
   * up to `timeoutMs`, default `commandTimeoutMs`, then TimeoutError); false: a node for reads
   * under `read_from`. Rejects at once with AuthError, TlsError or ClosedError.
   */
  route(primary?: boolean, options?: { timeoutMs?: number }): Promise<{ host: string; port: number }>
  /** Whether a connection to `host:port` may still carry writes (`primary`, default true) or reads. Sync, no I/O. */
  isRoutable(host: string, port: number, primary?: boolean): boolean
  /** Whether a failover is demoting, or has replaced, `host:port` (a reply read from it may be lost). Sync, no I/O. */
  isFenced(host: string, port: number): boolean
  /** The low 32 bits of the core's routing counter, live: it changes whenever isRoutable / isFenced may answer differently. Read only. */
  routingEpoch(): Uint32Array
  /** A connection of another library to `host:port` failed or found the wrong role: rediscover, calmly. */
  reportUnusable(host: string, port: number): void
  /** Whether close() was called. */
  readonly closed: boolean
  /**
   * Closes the client. Before the promise resolves every pending command settles (ClosedError if
   * it could not finish); no event is emitted after. Idempotent; may be called from a listener.
   */
  close(): Promise<void>

  on<K extends keyof ClientEvents>(event: K, listener: ClientEvents[K]): this
  once<K extends keyof ClientEvents>(event: K, listener: ClientEvents[K]): this
  off<K extends keyof ClientEvents>(event: K, listener: ClientEvents[K]): this
  addListener<K extends keyof ClientEvents>(event: K, listener: ClientEvents[K]): this
  removeListener<K extends keyof ClientEvents>(event: K, listener: ClientEvents[K]): this
}

/**
 * A transaction on a dedicated connection to the primary it began on. `exec` ends it; `discard()`
 * or leaving an `await using` scope ends it without running anything. `exec` rejects with
 * ConnectionLostError ("nothing was applied") when the primary changed since it began.
 */
export declare class Transaction {
  private constructor()
  /** The primary (`host:port`) the transaction runs on. */
  readonly primary: string
  /** `WATCH keys...`: `exec` then resolves with `null` if any of them changed. */
  watch(...keys: Arg[]): Promise<null>
  /** Runs one command now on the transaction's connection (a read between WATCH and EXEC). */
  execute(args: Arg[]): Promise<Reply>
  /** MULTI, the commands, EXEC: one reply per command, or `null` when a watched key changed. */
  exec(commands: Arg[][]): Promise<Reply[] | null>
  /** Ends the transaction without running anything. Idempotent. */
  discard(): void
  [Symbol.asyncDispose](): Promise<void>
}

/** Names of the log levels; their numbers are Python's (trace 5, debug 10, info 20, warn 30, error 40). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error'

/** One log record of the core. Messages never contain a password. */
export interface LogRecord {
  level: LogLevel
  levelNumber: number
  /** The emitting module, always under `sentinel_recovery`. */
  target: string
  message: string
}

/** The level numbers by name. */
export declare const LOG_LEVELS: Readonly<Record<LogLevel, number>>

/**
 * Sends the core's log records at `options.level` (default 'warn') or above to `logger`, on the
 * event loop, for every client of the process; `null` stops it. At most 10 000 records wait for
 * the event loop: beyond that the newest are dropped and a 'warn' record with their count comes
 * in their place. Events a client could not hand to its listeners in time (more than 65 536
 * waiting) are reported the same way.
 */
export declare function setLogger(logger: ((record: LogRecord) => void) | null, options?: { level?: LogLevel }): void
