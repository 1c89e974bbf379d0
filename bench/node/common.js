'use strict'
// Shared by the Node benchmarks: topology control through the testkit's sr-topology and stats.
const path = require('node:path')
const helpers = require('../../bindings-node/test/helpers')

const sr = require('../../bindings-node')

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

function sentinelsOf(info) {
  return info.sentinels.map((s) => ({ host: s.host, port: s.port }))
}

module.exports = { ...helpers, sr, percentile, sentinelsOf, path }
