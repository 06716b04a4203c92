/**
 * The client library's ingest against a stand-in tablet server: batches routed to the tablet holding their
 * rows, and split by size so that no request exceeds the server's body limit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import type { MetaClient } from '../../src/meta/client.js';
import type { TabletView } from '../../src/meta/views.js';
import { RpcServer } from '../../src/rpc/index.js';
import type { WireEntry } from '../../src/rpc/entries.js';

const SECRET = 'client-ingest-test-secret-0123456789';
const BODY_LIMIT = 64 * 1024;

describe('client ingest', () => {
  let server: RpcServer;
  let address: string;
  const received: { tablet: string; entries: WireEntry[]; bytes: number }[] = [];

  beforeAll(async () => {
    server = new RpcServer({ secret: SECRET, maxBodyBytes: BODY_LIMIT });
    server.route('POST', '/ingest', {}, ({ body }) => {
      const b = body as { tablet: string; entries: WireEntry[] };
      received.push({ ...b, bytes: JSON.stringify(b).length });
      return {};
    });
    const { port } = await server.listen('127.0.0.1', 0);
    address = `127.0.0.1:${port}`;
  });
  afterAll(() => server.close());

  /** A client whose table `t` has two tablets, split after row "m", both hosted by the stand-in server. */
  function client(options: { batchBytes?: number } = {}): ExcClient {
    const tablet = (name: string, endRow: string | null): TabletView =>
      ({
        tablet: name,
        endRowHex: endRow === null ? null : Buffer.from(endRow).toString('hex'),
        prevEndRowHex: null,
        loc: { server: address, session: '1' },
      }) as unknown as TabletView;
    const meta = {
      call: () => Promise.resolve({ table: {}, tablets: [tablet('t;m', 'm'), tablet('t<', null)] }),
    } as unknown as MetaClient;
    return new ExcClient({ meta, secret: SECRET, logger: silentLogger(), ...options });
  }

  it('ingest - a batch is sent once it passes batchBytes, so large values stay under the body limit', async () => {
    received.length = 0;
    const value = 'v'.repeat(1024);
    const rows = Array.from(
      { length: 200 },
      (_, i) => `${i % 2 === 0 ? 'a' : 'x'}${String(i).padStart(3, '0')}`,
    );
    const written = await client({ batchBytes: 16 * 1024 }).ingest(
      't',
      rows.map((row) => ({ row, value })),
    );

    expect(written).toBe(200);
    expect(received.length).toBeGreaterThan(2);
    for (const r of received) expect(r.bytes).toBeLessThan(BODY_LIMIT);
    const decoded = received.flatMap((r) =>
      r.entries.map((e) => [r.tablet, Buffer.from(e.row, 'base64').toString()] as const),
    );
    expect(decoded.map(([, row]) => row).sort()).toEqual([...rows].sort());
    for (const [tablet, row] of decoded) expect(tablet).toBe(row <= 'm' ? 't;m' : 't<');
  });

  it('ingest - skipBatches: a repeat of a failed call sends only the batches after those it had acknowledged, under the same names', async () => {
    const rows = Array.from({ length: 40 }, (_, i) => ({
      row: `${i % 2 === 0 ? 'a' : 'x'}${String(i).padStart(3, '0')}`,
      value: 'v'.repeat(1024),
    }));
    const c = () => client({ batchBytes: 4096 });
    const names = async (options: { requestId: string; skipBatches?: number }) => {
      received.length = 0;
      const acked: string[] = [];
      const written = await c().ingest('t', rows, { ...options, onBatch: (b) => acked.push(b.name) });
      return { acked, written, sent: received.reduce((n, r) => n + r.entries.length, 0) };
    };
    const whole = await names({ requestId: 'load' });
    expect(whole.acked.length).toBeGreaterThan(4);
    const again = await names({ requestId: 'load', skipBatches: 3 });
    // The same batches under the same names, the first three not sent: whether a tablet still remembers
    // them (15 minutes after applying them) does not matter.
    expect(again.acked).toEqual(whole.acked.slice(3));
    expect(again.written).toBe(again.sent);
    expect(again.written).toBeLessThan(rows.length);
    await expect(c().ingest('t', rows, { skipBatches: 1 })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('ingest - a row equal to a split point belongs to the tablet it ends', async () => {
    received.length = 0;
    await client().ingest('t', [{ row: 'm' }, { row: 'm\0' }]);
    expect(
      received.map((r) => [r.tablet, r.entries.map((e) => Buffer.from(e.row, 'base64').toString())]),
    ).toEqual([
      ['t;m', ['m']],
      ['t<', ['m\0']],
    ]);
  });

  it('ingest - a string UTF-8 cannot hold (a lone surrogate) is BAD_REQUEST naming the entry, before its batch is sent', async () => {
    received.length = 0;
    const entries = [
      { row: 'a', value: 'ok' },
      { row: 'b', cq: 'q\ud83d' },
    ];
    await expect(client().ingest('t', entries)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/^entry 1: cq holds a lone UTF-16 surrogate \(character 2\)/) as unknown,
    });
    expect(received).toEqual([]);
    // Scans name the bound.
    await expect(client().scan('t', { start: '\udc00' }).next()).rejects.toThrow(/^start holds a lone/);
  });
});
