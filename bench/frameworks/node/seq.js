'use strict'
// N sequential commands (SET and GET alternating, 16-byte values) through one ioredis instance,
// after SEQ_WARMUP (default 5000) untimed ones, so V8 has optimized the path being counted:
// `direct PORT N` talks to the primary itself, `adapter URL N` goes
// through sentinel-recovery/ioredis. Run by callgrind.sh, which subtracts two runs' counts so
// start-up, connect and close cancel.
const path = require('node:path')
const pkg = path.resolve(__dirname, '../../../bindings-node')
const Redis = require(require.resolve('ioredis', { paths: [pkg] }))
const { createIORedis } = require(path.join(pkg, 'ioredis.js'))

async function main() {
  const [kind, where, count] = process.argv.slice(2)
  const n = Number(count)
  if (!['direct', 'adapter'].includes(kind) || !where || !(n >= 0)) {
    throw new Error('usage: seq.js direct PORT N | adapter URL N')
  }
  const redis = kind === 'direct' ? new Redis({ port: Number(where), lazyConnect: false }) : createIORedis(where)
  const value = '0123456789abcdef'
  const run = async (k) => {
    for (let i = 0; i < k; i++) {
      if (i % 2 === 0) await redis.set(`seq:${i % 64}`, value)
      else await redis.get(`seq:${i % 64}`)
    }
  }
  await run(Number(process.env.SEQ_WARMUP || 5000))
  await run(n)
  await redis.quit()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
