'use strict'
/**
 * Pub/sub for applications: a Subscription follows failovers on a connection of the core's own.
 *
 * After a lost connection or a failover the core subscribes every channel and pattern again on the
 * new node; the client emits `subscription_lost`, then `subscription_restored` (with `gap_ms`).
 * Redis pub/sub is at-most-once: what is published during the gap is not received. Messages wait
 * in the core's bounded buffer (4096 by default) while nobody reads them; when it is full the
 * newest are dropped and counted (`dropped`). Messages are read only while someone listens
 * (`'message'` listeners or a `for await` loop), so an idle subscription costs the event loop
 * nothing.
 */

const { EventEmitter } = require('node:events')
const native = require('./native.js')

/** Channel and pattern names: strings or Buffers/Uint8Arrays. */
function names(list, what) {
  if (!Array.isArray(list)) throw new TypeError(`${what} must be an array of strings or Buffers`)
  for (const n of list) {
    if (typeof n !== 'string' && !(n instanceof Uint8Array)) {
      throw new TypeError(`${what} must be an array of strings or Buffers`)
    }
  }
  return list
}

/**
 * A subscription: emits `'message'` with `{channel, message, pattern}` (Buffers, or strings with
 * `decodeResponses`; `pattern` is null for channel subscriptions), and is an async iterable of
 * the same objects. Ends (`'end'`, the iteration finishes) when it or its client is closed.
 */
class Subscription extends EventEmitter {
  /** @private Use client.subscribe / client.psubscribe. */
  constructor(client, nativeSub) {
    super()
    this._client = client
    this._native = nativeSub
    this._ended = false
    this._pumping = false
    /** Resolvers of `for await` loops waiting for a message. */
    this._waiting = []
    this.on('newListener', (event) => {
      if (event === 'message') queueMicrotask(() => this._pump())
    })
  }

  /** Messages dropped because the buffer was full (the newest are dropped). */
  get dropped() {
    return Number(this._native.dropped)
  }

  /** The channels subscribed now. */
  get channels() {
    return this._native.channels()
  }

  /** The patterns subscribed now. */
  get patterns() {
    return this._native.patterns()
  }

  /** Whether the subscription ended. */
  get closed() {
    return this._ended
  }

  /** Adds channels; resolves once the node confirmed them. */
  subscribe(channels) {
    return this._change('subscribe', channels)
  }

  /** Adds glob-style patterns. */
  psubscribe(patterns) {
    return this._change('psubscribe', patterns)
  }

  /**
   * Removes channels; once it resolves no message of theirs is delivered. Without an argument,
   * ends the whole subscription (as close()).
   */
  unsubscribe(channels = undefined) {
    if (channels === undefined) return this.close()
    return this._change('unsubscribe', channels)
  }

  /** Removes patterns. */
  punsubscribe(patterns) {
    return this._change('punsubscribe', patterns)
  }

  /** Ends the subscription: the connection closes, `'end'` is emitted, iterations finish. */
  async close() {
    this._native.close()
    this._end()
  }

  _change(change, list) {
    try {
      names(list, change)
    } catch (e) {
      return Promise.reject(e)
    }
    return this._client._op((op) => this._native.change(op, change, list))
  }

  /** Reads messages, one at a time, while someone listens. */
  async _pump() {
    if (this._pumping || this._ended) return
    this._pumping = true
    try {
      while (!this._ended && (this.listenerCount('message') > 0 || this._waiting.length > 0)) {
        const m = await this._client._op((op) => this._native.next(op))
        // null: the subscription (or its client) was closed.
        if (m === null) {
          this._end()
          break
        }
        const message = { channel: m[0], message: m[1], pattern: m[2] }
        const waiter = this._waiting.shift()
        if (waiter) waiter({ value: message, done: false })
        try {
          this.emit('message', message)
        } catch (e) {
          // A listener threw: like any emitter, an uncaught exception; delivery goes on.
          process.nextTick(() => {
            throw e
          })
        }
      }
    } catch (e) {
      if (e && e.code === 'closed') this._end()
      else if (this.listenerCount('error') > 0) this.emit('error', e)
      else
        process.nextTick(() => {
          throw e
        })
    } finally {
      this._pumping = false
    }
  }

  _end() {
    if (this._ended) return
    this._ended = true
    for (const w of this._waiting.splice(0)) w({ value: undefined, done: true })
    this.emit('end')
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this._ended) return Promise.resolve({ value: undefined, done: true })
        const p = new Promise((resolve) => this._waiting.push(resolve))
        this._pump()
        return p
      },
      return: async () => {
        await this.close()
        return { value: undefined, done: true }
      },
      [Symbol.asyncIterator]() {
        return this
      },
    }
  }
}

/**
 * Subscribes on `client`; resolves with the Subscription once the node confirmed it. `signal`
 * (an AbortSignal, checked by the caller) cancels the wait: the promise rejects with an
 * AbortError, and a subscription the core completes anyway is closed.
 */
async function subscribe(client, channels, patterns, options = {}, signal = undefined) {
  names(channels, 'channels')
  names(patterns, 'patterns')
  if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
  const buffer = options.buffer
  if (buffer !== undefined && !(Number.isInteger(buffer) && buffer > 0 && buffer <= 0xffffffff)) {
    throw new TypeError('buffer must be a positive integer')
  }
  const nativeSub = native.subscriber(client._native)
  try {
    await client._op((op) => nativeSub.open(op, channels, patterns, buffer), signal)
  } catch (e) {
    // Closed, so one the core confirms after all (the abort raced the confirmation) is closed too.
    nativeSub.close()
    throw e
  }
  return new Subscription(client, nativeSub)
}

module.exports = { Subscription, subscribe }
