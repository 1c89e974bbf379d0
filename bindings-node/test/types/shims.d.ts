// ioredis' own declarations import the untyped `redis-errors`; this gives it a type so the check
// can keep `skipLibCheck` off (which would skip the package's own .d.ts files too).
declare module 'redis-errors'
