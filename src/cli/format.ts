/** Output helpers for commands: aligned tables for people, JSON for scripts. */
import { showRow } from '../row-text.js';

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** An aligned text table; `rows` of cells, already formatted. */
export function printTable(headers: string[], rows: (string | number | null | undefined)[][]): void {
  process.stdout.write(formatTable(headers, rows));
}

/** The text of {@link printTable}: a header line and a line per row (`(none)` when there are none). */
export function formatTable(headers: string[], rows: (string | number | null | undefined)[][]): string {
  const text = rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  const lines = [line(headers), ...text.map(line)];
  if (rows.length === 0) lines.push('(none)');
  return `${lines.join('\n')}\n`;
}

/** `1.2 MiB`, `512 B`. */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** `3.2s`, `4m10s`, `2h5m`. */
export function age(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60}s`;
  return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}

/** A row (hex on the wire) as text when printable, else 0x-hex (row-text.ts); `(last)` for none. */
export function rowText(hex: string | null): string {
  return hex === null ? '(last)' : showRow(Buffer.from(hex, 'hex'));
}

/** A progress bar of `width` cells, `[#####.....]`, for `fraction` (0 to 1) of the work done. */
export function progressBar(fraction: number, width = 30): string {
  const filled = Math.round(Math.max(0, Math.min(1, fraction)) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}
