// The excompact monitor page: plain DOM, no framework, no build step. It polls the monitor server
// (/api/state) every second and redraws the tables and the two charts; every value is inserted as text,
// never as HTML. Changes (cancel, release) are POSTs with the x-excompact-monitor header, after a
// confirmation in a <dialog>.

const POLL_MS = 1000;
const WINDOW_MS = 30 * 60 * 1000;
const COLORS = ['#2b6cb0', '#c05621', '#2f855a', '#6b46c1', '#b83280', '#4a5568'];

/** Chart samples, oldest first (the server sends only the new ones after the first poll). */
let samples = [];
let lastSampleAt = 0;

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') node.className = v;
    else if (k === 'onclick') node.addEventListener('click', v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? '–')));
  return node;
}

function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function age(ms) {
  if (ms === null || ms === undefined) return '–';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function bar(percent) {
  const p = percent === null || percent === undefined ? null : Math.max(0, Math.min(100, percent));
  const fill = el('div', { class: 'fill' });
  fill.style.width = `${p ?? 0}%`;
  return el(
    'div',
    { class: 'bar', title: p === null ? 'unknown' : `${p.toFixed(0)} %` },
    fill,
    el('span', {}, p === null ? '?' : `${p.toFixed(0)} %`),
  );
}

/** Replaces a table's body with `rows` (arrays of cells), or one "none" row. */
function fill(tableId, rows, keys = []) {
  const body = $(tableId).tBodies[0];
  const width = $(tableId).tHead.rows[0].cells.length;
  body.replaceChildren(
    ...(rows.length === 0
      ? [el('tr', { class: 'empty' }, el('td', { colspan: String(width) }, 'none'))]
      : rows.map((cells, i) => {
          const tr = el('tr', keys[i] ? { 'data-key': keys[i] } : {});
          for (const c of cells) tr.append(c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c));
          return tr;
        })),
  );
}

async function post(path, what) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-excompact-monitor': '1' },
    body: '{}',
  });
  const answer = await res.json().catch(() => ({}));
  if (!res.ok)
    throw new Error(
      answer.error ? `${answer.error.code}: ${answer.error.message}` : `${what}: HTTP ${res.status}`,
    );
  return answer;
}

/** Asks in the page's dialog; resolves true when confirmed. */
function confirmAction(text) {
  const dialog = $('confirm');
  $('confirm-text').textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.showModal();
  });
}

function actionButton(label, question, path) {
  return el(
    'button',
    {
      class: 'danger',
      onclick: async (event) => {
        const button = event.currentTarget;
        if (!(await confirmAction(question))) return;
        button.disabled = true;
        try {
          const answer = await post(path, label);
          setStatus(`${label}: ${JSON.stringify(answer)}`, 'ok', 5000);
        } catch (err) {
          setStatus(`${label} failed: ${err.message}`, 'bad', 10000);
          button.disabled = false;
        }
      },
    },
    label,
  );
}

/** An action's result stays in the status line this long before "live" replaces it. */
let holdStatusUntil = 0;

function setStatus(text, kind, holdMs = 0) {
  if (holdMs > 0) holdStatusUntil = Date.now() + holdMs;
  const s = $('status');
  s.textContent = text;
  s.className = `status ${kind}`;
}

function render(snapshot) {
  fill(
    'queues',
    snapshot.queues.map((q) => [
      q.name,
      q.queued,
      bytes(q.queuedBytes),
      q.running,
      q.parked,
      q.committedPerMin,
      q.failedPerMin,
      q.compactors,
    ]),
    snapshot.queues.map((q) => q.name),
  );
  fill(
    'compactors',
    snapshot.compactors.map((c) => [
      el('td', { title: c.path }, c.name),
      c.queue,
      c.host,
      age(c.upMs),
      c.job ? c.job.tablet : 'idle',
      c.job ? el('td', {}, bar(c.job.percent)) : '',
      c.job && c.job.mbps !== null ? c.job.mbps.toFixed(2) : '',
    ]),
    snapshot.compactors.map((c) => c.path),
  );
  fill(
    'running',
    snapshot.running.map((r) => [
      el('td', { class: 'mono' }, r.ecid),
      r.table,
      el('td', { class: 'mono' }, r.tablet),
      r.queue,
      r.compactor,
      age(r.ageMs),
      `${bytes(r.bytesRead)} / ${bytes(r.bytesWritten)}`,
      el('td', {}, bar(r.percent)),
      el(
        'td',
        {},
        actionButton(
          'Cancel',
          `Cancel compaction ${r.ecid} of ${r.table} (${r.tablet})? Its tablet queues the work again.`,
          `/api/compactions/${encodeURIComponent(r.ecid)}/cancel`,
        ),
      ),
    ]),
    snapshot.running.map((r) => r.ecid),
  );
  fill(
    'parked',
    snapshot.parked.map((p) => [
      p.table,
      el('td', { class: 'mono' }, p.tablet),
      p.queue,
      p.attempts,
      el('td', { class: 'error' }, p.lastError),
      p.userCompactionIds.length > 0 ? `user ${p.userCompactionIds.join(', ')}` : 'system',
      el(
        'td',
        {},
        actionButton(
          'Release',
          `Release the parked job of ${p.table} (${p.tablet})? It will be tried again.`,
          `/api/parked/${encodeURIComponent(p.id)}/release`,
        ),
        // Only a user compaction's job can be cancelled: a system job would be planned again at once.
        p.userCompactionIds.length > 0
          ? actionButton(
              'Cancel',
              `Cancel user compaction ${p.userCompactionIds.join(', ')} on ${p.table} (${p.tablet})? ` +
                'Its files are left as they are, and system compactions go on over them.',
              `/api/parked/${encodeURIComponent(p.id)}/cancel`,
            )
          : '',
      ),
    ]),
    snapshot.parked.map((p) => p.id),
  );
  fill(
    'tablets',
    snapshot.tablets.map((t) => [
      t.table,
      el('td', { class: 'mono' }, t.tablet),
      t.files,
      bytes(t.bytes),
      t.host,
    ]),
  );
}

const SVG = 'http://www.w3.org/2000/svg';

/** Draws `series` ({ name, points: [[t, v]] }) over the last 30 minutes into an SVG of 600 × 160. */
function chart(svgId, series, legendId, floor = 1) {
  const svg = $(svgId);
  const now = Date.now();
  const max = Math.max(floor, ...series.flatMap((s) => s.points.map((p) => p[1])));
  // The last 30 minutes, or less while the monitor has not run that long (at least one minute), so a
  // fresh page shows its first points across the chart rather than squeezed against its right edge.
  const first = Math.min(now, ...series.flatMap((s) => s.points.map((p) => p[0])));
  const span = Math.max(60_000, Math.min(WINDOW_MS, now - first));
  const x = (t) => ((t - (now - span)) / span) * 600;
  const y = (v) => 155 - (v / max) * 145;
  const nodes = [];
  const axis = document.createElementNS(SVG, 'text');
  axis.setAttribute('x', '4');
  axis.setAttribute('y', '12');
  axis.setAttribute('class', 'axis');
  axis.textContent = `max ${Number.isInteger(max) ? max : max.toFixed(2)} · last ${Math.round(span / 60_000)} min`;
  nodes.push(axis);
  series.forEach((s, i) => {
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' '));
    line.setAttribute('stroke', COLORS[i % COLORS.length]);
    line.setAttribute('data-series', s.name);
    nodes.push(line);
  });
  svg.replaceChildren(...nodes);
  if (legendId) {
    $(legendId).replaceChildren(
      ...series.map((s, i) => {
        const swatch = el('span', { class: 'swatch' });
        swatch.style.background = COLORS[i % COLORS.length];
        return el('span', {}, swatch, s.name);
      }),
    );
  }
}

function drawCharts() {
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.queued)))].sort();
  chart(
    'chart-depth',
    // Own properties only: a sample from before a queue existed lacks it, and `s.queued.constructor` (a
    // valid queue name) would otherwise be Object's function, not 0.
    names.map((name) => ({
      name,
      points: samples.map((s) => [s.at, Object.hasOwn(s.queued, name) ? s.queued[name] : 0]),
    })),
    'legend-depth',
  );
  // A floor of 0.1 MB/s, not 1: a throttled or small cluster's throughput still shows.
  chart(
    'chart-throughput',
    [{ name: 'read MB/s', points: samples.map((s) => [s.at, s.readBytesPerSec / 1e6]) }],
    undefined,
    0.1,
  );
}

async function poll() {
  try {
    const res = await fetch(`/api/state?since=${lastSampleAt}`, { cache: 'no-store' });
    const state = await res.json();
    if (!res.ok) throw new Error(state.error ? state.error.message : `HTTP ${res.status}`);
    samples = samples.concat(state.samples).filter((s) => s.at > Date.now() - WINDOW_MS);
    if (samples.length > 0) lastSampleAt = samples[samples.length - 1].at;
    if (state.snapshot) {
      render(state.snapshot);
      document.body.dataset.updated = String(state.snapshot.at);
    }
    drawCharts();
    if (state.error) setStatus(`cluster unreachable: ${state.error}`, 'bad');
    else if (state.snapshot?.error) setStatus(state.snapshot.error, 'warn');
    else if (state.snapshot && Date.now() > holdStatusUntil)
      setStatus(`live · ${new Date(state.snapshot.at).toLocaleTimeString()}`, 'live');
  } catch (err) {
    setStatus(`monitor unreachable: ${err.message}`, 'bad');
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

void poll();
