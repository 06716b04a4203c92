/**
 * CRC-32 (ISO-HDLC: the polynomial and values of zlib's crc32) of every block a file stores, written and
 * checked on every read: a merge checksums each byte of its inputs and of its output.
 *
 * Through `@node-rs/crc32` (Rust's crc32fast, carry-less multiplication on x86-64 and arm64), a napi-rs
 * package whose binaries come from the npm registry as platform packages, as lz4-napi's do: on 64 KiB
 * blocks it runs at about 20 GB/s where Node 20's `zlib.crc32` (zlib's table-driven code, no SIMD in
 * Node's build) runs at 2.4–4 GB/s, which made checksums 14–18% of a merge's time (bench/README.md).
 * The same function, so the same values: files written either way read either way. Where the platform
 * package is missing (an architecture with no binary), zlib's is used; nothing else changes.
 */
import { createRequire } from 'node:module';
import { crc32 as zlibCrc32 } from 'node:zlib';

type Crc32 = (data: Uint8Array) => number;

function load(): { crc32: Crc32; impl: 'native' | 'zlib' } {
  try {
    const native = createRequire(import.meta.url)('@node-rs/crc32') as { crc32: Crc32 };
    // Checked once against zlib's on a known input: a binding that loads but disagrees is not used.
    const probe = Buffer.from('excompact crc32 probe');
    if (native.crc32(probe) === zlibCrc32(probe)) return { crc32: native.crc32, impl: 'native' };
  } catch {
    // No binary for this platform: zlib's below.
  }
  return { crc32: zlibCrc32, impl: 'zlib' };
}

const loaded = load();

/** Which implementation this process uses (for the benchmark's report). */
export const crc32Implementation: 'native' | 'zlib' = loaded.impl;

/** CRC-32 of `data`: the value zlib's crc32 gives. */
export const crc32: Crc32 = loaded.crc32;
