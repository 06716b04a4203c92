/** The HTTP/1.1 messages of s3-read-into.ts: body framing, response heads, request heads. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { HttpRequest } from '@smithy/types';
import {
  chunked,
  fixedLength,
  framingOf,
  parseHead,
  requestHead,
  type BodyFraming,
} from '../../src/storage/s3-http1.js';

/** Feeds `wire` cut at `cuts`; returns the body's bytes and whether the framing saw its end. */
function feed(framing: BodyFraming, wire: Buffer, cuts: number[]): { body: Buffer; done: boolean } {
  const pieces: Buffer[] = [];
  let at = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < wire.length)]
    .sort((a, b) => a - b)
    .concat(wire.length)) {
    framing.take(wire.subarray(at, cut), (p) => pieces.push(Buffer.from(p)));
    at = cut;
  }
  return { body: Buffer.concat(pieces), done: framing.done() };
}

function chunkedWire(data: Buffer, sizes: number[], trailer = ''): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (const size of sizes) {
    if (at >= data.length) break;
    const piece = data.subarray(at, at + size);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
    at += piece.length;
  }
  if (at < data.length) {
    const rest = data.subarray(at);
    parts.push(
      Buffer.from(`${rest.length.toString(16).toUpperCase()}; name=value\r\n`),
      rest,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`0\r\n${trailer}\r\n`));
  return Buffer.concat(parts);
}

describe('body framing', () => {
  it('chunked: any data, any chunk sizes, cut anywhere, decodes to the data; bytes after the end are extra', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.array(fc.integer({ min: 1, max: 700 }), { maxLength: 8 }),
        fc.array(fc.nat(4000), { maxLength: 12 }),
        fc.boolean(),
        fc.nat(20),
        (bytes, sizes, cuts, trailer, extra) => {
          const data = Buffer.from(bytes);
          const wire = Buffer.concat([
            chunkedWire(data, sizes, trailer ? 'x-a: 1\r\nx-b: 2\r\n' : ''),
            Buffer.alloc(extra, 7),
          ]);
          const framing = chunked();
          const out = feed(framing, wire, cuts);
          expect(out.body.equals(data)).toBe(true);
          expect(out.done).toBe(true);
          expect(framing.extra()).toBe(extra);
        },
      ),
    );
  });

  it('chunked: a body cut short is not done; a malformed size or chunk is an error naming it', () => {
    const data = Buffer.from('hello world');
    const wire = chunkedWire(data, [5]);
    expect(feed(chunked(), wire.subarray(0, wire.length - 3), []).done).toBe(false);
    expect(() => feed(chunked(), Buffer.from('zz\r\nabc'), [])).toThrow(/chunk size "zz"/);
    expect(() => feed(chunked(), Buffer.from('3\r\nabcd\r\n'), [])).toThrow(/chunk longer than its size/);
    expect(() => feed(chunked(), Buffer.from('3\nabc'), [])).toThrow(/without CRLF/);
    expect(() => feed(chunked(), Buffer.alloc(5000, 0x31), [])).toThrow(/chunk line too long/);
    const err = (() => {
      try {
        feed(chunked(), Buffer.from('-1\r\n'), []);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toMatchObject({ code: 'ECONNRESET' });
  });

  it('fixed length: the first n bytes are the body, the rest extra; 0 is done at once', () => {
    const framing = fixedLength(10);
    const out = feed(framing, Buffer.from('0123456789abc'), [3, 9]);
    expect(out.body.toString()).toBe('0123456789');
    expect(out.done).toBe(true);
    expect(framing.extra()).toBe(3);
    expect(fixedLength(0).done()).toBe(true);
    expect(fixedLength(5).wanted()).toBe(5);
  });
});

describe('response heads', () => {
  it('status, reason, lower-cased headers (repeats joined), and whether the connection stays open', () => {
    const head = parseHead(
      'HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\nX-Amz-Meta: a\r\nx-amz-meta: b\r\nETag: "e"',
    );
    expect(head).toEqual({
      statusCode: 206,
      reason: 'Partial Content',
      headers: { 'content-length': '5', 'x-amz-meta': 'a, b', etag: '"e"' },
      keepAlive: true,
    });
    expect(parseHead('HTTP/1.1 200 OK\r\nConnection: close').keepAlive).toBe(false);
    expect(parseHead('HTTP/1.0 200 OK').keepAlive).toBe(false);
    expect(parseHead('HTTP/1.0 200 OK\r\nConnection: keep-alive').keepAlive).toBe(true);
    expect(parseHead('HTTP/1.1 200').reason).toBe('');
  });

  it('a head that is not HTTP/1.x, or a header line without a name, is an error naming it', () => {
    expect(() => parseHead('HTTP/2 200 OK')).toThrow(/not an HTTP\/1\.x status line: "HTTP\/2 200 OK"/);
    expect(() => parseHead('HTTP/1.1 200 OK\r\nno colon here')).toThrow(/malformed header line/);
    expect(() => parseHead('HTTP/1.1 200 OK\r\n: empty name')).toThrow(/malformed header line/);
  });

  it('framing: chunked over a length, none when 204, the end when neither; a bad length or coding is refused', () => {
    const head = (headers: Record<string, string>, statusCode = 200) => ({
      statusCode,
      reason: '',
      headers,
      keepAlive: true,
    });
    expect(framingOf(head({ 'transfer-encoding': 'chunked', 'content-length': '5' })).kind).toBe('chunked');
    expect(framingOf(head({ 'content-length': '5' })).wanted()).toBe(5);
    expect(framingOf(head({}, 204)).done()).toBe(true);
    expect(framingOf(head({})).kind).toBe('close');
    expect(() => framingOf(head({ 'content-length': '-1' }))).toThrow(/content-length "-1"/);
    expect(() => framingOf(head({ 'transfer-encoding': 'gzip' }))).toThrow(/transfer-encoding gzip/);
  });
});

describe('request heads', () => {
  const request = (over: Partial<HttpRequest>): HttpRequest => ({
    method: 'GET',
    protocol: 'http:',
    hostname: 'h',
    port: 9000,
    path: '/b/k',
    query: {},
    headers: {},
    ...over,
  });

  it('the path as given, the query sorted and escaped as the SDK signs it, a Host when none was set', () => {
    expect(
      requestHead(
        request({
          query: { 'x-id': 'GetObject', a: ["it's (x)*!", 'b c'], flag: null as unknown as string },
        }),
      ),
    ).toBe('GET /b/k?a=it%27s%20%28x%29%2A%21&a=b%20c&flag&x-id=GetObject HTTP/1.1\r\nhost: h:9000\r\n\r\n');
    expect(requestHead(request({ headers: { Host: 'other', 'x-a': '1' } }))).toBe(
      'GET /b/k HTTP/1.1\r\nHost: other\r\nx-a: 1\r\n\r\n',
    );
  });

  it('a header with a line break is refused, never sent', () => {
    expect(() => requestHead(request({ headers: { 'x-a': 'v\r\nx-injected: 1' } }))).toThrow(/line break/);
  });
});
