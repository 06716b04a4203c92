import { randomBytes } from 'node:crypto';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { crc32, crc32Implementation } from '../../src/storage/index.js';

describe('block checksums', () => {
  it('crc32 - the native implementation is the one in use on this platform', () => {
    // linux-x64 has a binary on the registry: falling back to zlib here would be a broken install.
    if (process.platform === 'linux' && process.arch === 'x64') expect(crc32Implementation).toBe('native');
  });

  it('crc32 - gives zlib’s value for every length and alignment (files read and write either way)', () => {
    const data = randomBytes(1 << 17);
    for (const length of [0, 1, 3, 4, 7, 15, 16, 63, 64, 65, 255, 4096, 65_536, 65_537, 1 << 17]) {
      for (const offset of [0, 1, 5]) {
        const view = data.subarray(offset, Math.min(data.length, offset + length));
        expect(crc32(view), `length ${length} at offset ${offset}`).toBe(zlibCrc32(view));
      }
    }
  });
});
