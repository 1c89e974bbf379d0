/// <reference types="node" />
/**
 * sentinel-recovery/ioredis: an ioredis `Redis` whose connections go where the sentinel-recovery
 * core routes them (the ROLE-verified primary, or a replica for reads), that waits through a
 * failover and closes its connection to a primary that a failover starts demoting.
 * Requires the `ioredis` package (an optional peer dependency).
 */
import type { Redis, RedisOptions } from 'ioredis'
import type { Client, ClientOptions } from './index'

/** ioredis options createIORedis accepts: where to connect comes from the URL. */
export type CreateIORedisOptions = Omit<RedisOptions, 'sentinels' | 'name' | 'host' | 'port' | 'path' | 'Connector' | 'role'> & {
  /** 'primary' (default): writes and reads on the verified primary; 'replica': reads under `read_from` (prefer-replica unless the URL says otherwise). ioredis' 'master' and 'slave' say the same. */
  role?: 'primary' | 'replica' | 'master' | 'slave'
  /** Options of the shared sentinel-recovery Client (as for `Client.open`); instances with equal URL and clientOptions share one. */
  clientOptions?: ClientOptions
}

/**
 * The Redis instances createIORedis returns. An intersection, not an interface extending
 * `Redis`: ioredis 6 declares `duplicate` generic over its reply mapping, which a narrower
 * override could not extend; listed first, this `duplicate` is the overload a call picks.
 */
export type SentinelRecoveryRedis = {
  /** A new instance with the same options and the same shared Client (BullMQ calls this). */
  duplicate(override?: Partial<RedisOptions>): SentinelRecoveryRedis
  /** The shared sentinel-recovery Client: `topology()`, events. Closed when its last instance ends. */
  readonly sentinelRecoveryClient: Client
} & Redis

/**
 * An ioredis `Redis` for the service of `url` (`redis+sentinel://...`). Defaults (overridable):
 * `autoResendUnfulfilledCommands: false` (a command in flight at a failover is rejected, never
 * re-sent), `enableOfflineQueue: true` (commands issued while disconnected were never sent and
 * wait for the new primary), `maxRetriesPerRequest: null`, `maintNotifications: 'disabled'`.
 * Throws ConfigError for a bad URL or option, TypeError for an ioredis option naming where to
 * connect.
 */
export declare function createIORedis(url: string, options?: CreateIORedisOptions): SentinelRecoveryRedis

/**
 * ioredis' `Connector` option: `new Redis({Connector: SentinelRecoveryConnector,
 * sentinelRecovery: {url, clientOptions}})`. `connect()` resolves with a connected socket to the
 * core's route and never rejects for a failover (it waits); it rejects only after `disconnect()`
 * or for what waiting cannot fix (ConfigError, AuthError, TlsError, ClosedError), which ends the
 * ioredis client. Prefer createIORedis: with a bare Connector, the shared Client is let go only
 * when the instance is garbage-collected.
 */
export declare class SentinelRecoveryConnector {
  constructor(options: RedisOptions & { sentinelRecovery: { url: string; clientOptions?: ClientOptions } })
  /** The shared sentinel-recovery Client. */
  readonly client: Client
  connect(emit?: (type: string, error?: unknown) => void): Promise<NodeJS.Socket>
  /** ioredis' ready check (parsed INFO): a primary connection needs role master; every connection must still be routable. */
  check(info: { role?: string } | undefined): boolean
  disconnect(): void
  /** Lets go of the shared Client (connect() takes it again). */
  release(): void
}

/** The defaults createIORedis applies. */
export declare const DEFAULTS: Readonly<{
  autoResendUnfulfilledCommands: false
  enableOfflineQueue: true
  maxRetriesPerRequest: null
  maintNotifications: 'disabled'
}>
