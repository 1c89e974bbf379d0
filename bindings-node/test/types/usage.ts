// Compiled by test/types.test.js (`tsc -p test/types`), never run: how a TypeScript user calls the
// package, checked against index.d.ts and ioredis.d.ts. A line marked @ts-expect-error must fail
// to compile; if the declarations ever accept it, tsc reports the unused directive.
import {
  AbortError,
  Client,
  ConfigError,
  doctor,
  ERROR_CLASSES,
  EVENT_KINDS,
  SentinelRecoveryError,
  setLogger,
  startProxy,
  Proxy,
  TimeoutError,
  type Arg,
  type DoctorReport,
  type EventOf,
  type Message,
  type ProxyOptions,
  type ProxyStats,
  type Reply,
  type SentinelEvent,
  type Topology,
} from '../../index'
import { createIORedis, type SentinelRecoveryRedis } from '../../ioredis'

export async function usage(url: string): Promise<void> {
  const client: Client = await Client.connect(url, { decodeResponses: true, commandTimeoutMs: 500 })
  const opened: Client = Client.open(url, { queueSize: 10, readFrom: 'prefer-replica' })

  const args: Arg[] = ['SET', 'k', Buffer.from('v'), 1, 2n, new Uint8Array([1])]
  const reply: Reply = await client.execute(args, { timeoutMs: 300, signal: AbortSignal.timeout(1000) })
  if (reply instanceof SentinelRecoveryError) throw reply
  const replies: Array<Reply | SentinelRecoveryError> = await client.pipeline([['GET', 'k'], ['PING']], { timeoutMs: 1000 })
  const exec: Reply[] | null = await client.transaction([['INCR', 'n']], { watch: ['n'], timeoutMs: 1000 })
  const tx = await client.beginTransaction({ timeoutMs: 1000 })
  const watched: null = await tx.watch('n')
  const read: Reply = await tx.execute(['GET', 'n'])
  const ran: Reply[] | null = await tx.exec([['SET', 'n', '1']])
  tx.discard()

  const sub = await client.subscribe(['a'], { patterns: ['b.*'], buffer: 16, signal: new AbortController().signal })
  sub.on('message', (m: Message) => m.pattern)
  for await (const m of sub) {
    const channel: Buffer | string = m.channel
    break
  }
  await sub.unsubscribe(['a'])
  await sub.close()
  const psub = await client.psubscribe(['x.*'])
  await psub.close()

  client.on('primary_changed', (e: EventOf<'primary_changed'>) => e.kind)
  client.on('event', (e: SentinelEvent) => e.kind)
  const kinds: readonly string[] = EVENT_KINDS
  const topology: Topology = client.topology()
  const route: { host: string; port: number } = await client.route(true, { timeoutMs: 100 })
  const routable: boolean = client.isRoutable(route.host, route.port)
  const epoch: Uint32Array = client.routingEpoch()

  const report: DoctorReport = await doctor(url, { watchMs: 100, pings: 3, signal: AbortSignal.timeout(5000) })
  setLogger((record) => record.message, { level: 'info' })
  const classes = ERROR_CLASSES
  const timeout: typeof SentinelRecoveryError = classes.timeout
  try {
    await client.execute(['BLPOP', 'q', '0'], { timeoutMs: 100 })
  } catch (e) {
    if (e instanceof TimeoutError || e instanceof ConfigError) e.code
    if (e instanceof AbortError) e.name
  }

  const redis: SentinelRecoveryRedis = createIORedis(url, { role: 'primary', clientOptions: { commandTimeoutMs: 1000 } })
  const shared: Client = redis.sentinelRecoveryClient
  redis.disconnect()

  // @ts-expect-error: a command is an array of arguments, not a string.
  await client.execute('GET k')
  // @ts-expect-error: unknown per-call option.
  await client.execute(['GET', 'k'], { timeout: 5 })
  // @ts-expect-error: readFrom takes one of three values.
  Client.open(url, { readFrom: 'any' })

  await opened.close()
  await client.close()
  void [replies, exec, watched, read, ran, kinds, routable, epoch, report, timeout, shared]
}

export function duplicated(redis: SentinelRecoveryRedis): Client {
  // BullMQ's call: the copy is one of ours too.
  return redis.duplicate({ maxRetriesPerRequest: null }).sentinelRecoveryClient
}

export async function proxies(url: string): Promise<void> {
  const options: ProxyOptions = { holdMs: 1000, maxClients: 10, route: 'primary', commandTimeoutMs: 500, addressMap: '10.0.0.5:6379>127.0.0.1:16379' }
  await using proxy = await startProxy(url, options)
  const target: string = proxy.url
  const port: number | undefined = proxy.port
  const stats: ProxyStats = proxy.stats()
  const open: number = stats.sessions_open
  const same: Proxy = proxy.unref().ref()
  const onUnix = await startProxy(url, { listen: 'unix:/tmp/sr.sock', unixMode: 0o600, lend_credentials: true })
  const path: string | undefined = onUnix.path
  await onUnix.close({ graceMs: 0 })

  // @ts-expect-error: route is primary or read.
  await startProxy(url, { route: 'replica' })
  // @ts-expect-error: addressMap takes its text form only.
  await startProxy(url, { addressMap: () => null })
  // @ts-expect-error: unknown close option.
  await proxy.close({ grace: 1 })
  void [target, port, open, same, path, proxy.closed]
}
