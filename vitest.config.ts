import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file runs in its own child process: suites start real servers and send signals, and a
    // crash must not take other suites with it. Two at a time on a 2-core machine.
    pool: 'forks',
    poolOptions: { forks: { minForks: 1, maxForks: Number(process.env.EXC_TEST_WORKERS ?? 2) } },
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    // The AWS SDK warns on Node 20 that later versions will need Node 22 (see src/storage/s3.ts).
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
