'use strict'
// Throughput and latency of SET/GET, sequential (one at a time) and 64 concurrent, on one client
// per library, against the same real primary: sentinel-recovery, ioredis (sentinel mode),
// node-redis (createSentinel), valkey-glide (straight to the primary), and redis-benchmark as the
// ceiling. Usage: node throughput.js [SEQ_OPS] [CONC_OPS]
const { execFileSync } = require('node:child_process')
const { startTopology, sr, percentile, sentinelsOf } = require('./common')
const Redis = require('ioredis')
const { createSentinel } = require('redis')
const { GlideClient } = require('@valkey/valkey-glide')

const SEQ = Number(process.argv[2] || 20000)
const CONC = Number(process.argv[3] || 200000)
const WIDTH = 64

async function sequential(op) {
  const lat = new Float64Array(SEQ)
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < SEQ; i++) {
    const s = process.hrtime.bigint()
    await op(i)
    lat[i] = Number(process.hrtime.bigint() - s) / 1e3
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9
  lat.sort()
  return { ops: SEQ / secs, p50: percentile(lat, 50), p99: percentile(lat, 99) }
}

async function concurrent(op) {
  let next = 0
  const t0 = process.hrtime.bigint()
  await Promise.all(
    Array.from({ length: WIDTH }, async () => {
      while (next < CONC) await op(next++)
    }),
  )
  return { ops: CONC / (Number(process.hrtime.bigint() - t0) / 1e9) }
}

async function measure(name, set, get) {
  const value = 'x'.repeat(16)
  for (let i = 0; i < 2000; i++) await set(i, value) // warm-up
  const row = { name }
  row.setSeq = await sequential((i) => set(i, value))
  row.getSeq = await sequential((i) => get(i))
  row.setConc = await concurrent((i) => set(i, value))
  row.getConc = await concurrent((i) => get(i))
  const f = (r) => Math.round(r.ops).toString()
  console.log(
    [name, f(row.setSeq), f(row.getSeq), row.getSeq.p50.toFixed(0), row.getSeq.p99.toFixed(0), f(row.setConc), f(row.getConc)].join('\t'),
  )
  return row
}

;(async () => {
  const topo = await startTopology()
  const { info } = topo
  const key = (i) => `bench:${i % 1000}`
  try {
    console.log(`# SEQ=${SEQ} CONC=${CONC} width=${WIDTH} node ${process.version}`)
    console.log('client\tSET seq/s\tGET seq/s\tGET p50 us\tGET p99 us\tSET x64/s\tGET x64/s')

    if (process.env.ONLY_SR) {
      const c = await sr.Client.connect(info.url)
      await measure('sentinel-recovery', (i, v) => c.execute(['SET', key(i), v]), (i) => c.execute(['GET', key(i)]))
      await c.close()
      return
    }
    const c = await sr.Client.connect(info.url)
    await measure('sentinel-recovery', (i, v) => c.execute(['SET', key(i), v]), (i) => c.execute(['GET', key(i)]))
    await c.close()

    const io = new Redis({ sentinels: sentinelsOf(info), name: info.service, lazyConnect: false })
    await io.ping()
    await measure('ioredis (sentinel)', (i, v) => io.set(key(i), v), (i) => io.get(key(i)))
    io.disconnect()

    const nr = await createSentinel({ name: info.service, sentinelRootNodes: sentinelsOf(info) })
      .on('error', () => {})
      .connect()
    await measure('node-redis (sentinel)', (i, v) => nr.set(key(i), v), (i) => nr.get(key(i)))
    await nr.close()

    const gl = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: info.primary.port }] })
    await measure('valkey-glide (direct)', (i, v) => gl.set(key(i), v), (i) => gl.get(key(i)))
    gl.close()

    for (const clients of [1, 64]) {
      const out = execFileSync('redis-benchmark', ['-p', String(info.primary.port), '-t', 'set,get', '-n', String(clients === 1 ? SEQ : CONC), '-c', String(clients), '-q', '-d', '16'], { encoding: 'utf8' })
      console.log(`redis-benchmark -c ${clients}: ${out.split(/[\r\n]+/).filter((l) => /requests per second/.test(l)).map((l) => l.trim()).join('; ')}`)
    }
  } finally {
    await topo.down()
  }
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
