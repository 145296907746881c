// Gang jobs page: draws the JSON API (/gang/api/...) and refreshes it every few seconds.
// Plain browser JavaScript, no framework and no build step. Text from the cluster only ever
// reaches the page through textContent or SVG text nodes, never as HTML.
//
// The same page, with data-view="report", is a report's timeline in a file of its own
// (airflow_gang/plugins/offline_chart.py: this script, gang.css and theme.js inlined): it draws
// the timeline embedded in the file (<script id="gang-report-data">, the shape of
// /gang/api/timeline) with the same timelineChart, asks no server and links nowhere.
(function () {
  "use strict";

  const body = document.body;
  const ROOT = body.dataset.root || "";
  const VIEW = body.dataset.view;
  const REPORT = VIEW === "report";
  const params = new URLSearchParams(window.location.search);
  const REFRESH_MS = Math.max(1, Number(params.get("refresh")) || 5) * 1000;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PAGE_SIZE = 100;
  // "ending": its objects are gone while its task is still active, about to record how it
  // ended: not live any more, its end not known yet.
  const ENDING = "ending";
  const ENDED = ["succeeded", "failed", "admission_timeout", "timed_out", "lost", "killed", "gone", ENDING];
  const DISRUPTED = "disrupted";
  const RANGES = { "1h": 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400 };
  let paused = false;
  let timer = null;
  let offset = 0;

  // --- times: 24-hour, in one timezone ---------------------------------------------------------
  // The default is Airflow's [core] default_timezone, handed over by the server in data-timezone
  // (an IANA name, "UTC", or "system": the browser's own zone). The user's own choice, from the
  // header's control, is kept under this page's own localStorage key; ?tz=<IANA name> in the
  // address wins over both. A zone the browser does not know is ignored (the next one applies).
  const TZ_KEY = "airflow-gang.timezone";
  const BROWSER = "browser";  // the stored choice "the browser's own zone, wherever it is"
  const BROWSER_ZONE = (() => {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch (error) {
      return "UTC";
    }
  })();

  // Every zone name the browser lists (for the control's list, and to spell a name as it does).
  let zoneNames = null;
  function listedZones() {
    if (zoneNames === null) {
      try {
        zoneNames = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
      } catch (error) {
        zoneNames = [];
      }
    }
    return zoneNames;
  }

  // The zone's name, or null for one the browser does not know. A known name is kept as written
  // (browsers resolve some to older aliases: Asia/Kolkata to Asia/Calcutta), but in the case the
  // browser's list spells it ("europe/paris" -> "Europe/Paris").
  function knownZone(value) {
    if (typeof value !== "string" || !value.trim()) return null;
    const name = value.trim();
    if (name.toLowerCase() === "utc") return "UTC";
    if (name.toLowerCase() === "system" || name === BROWSER) return BROWSER_ZONE;
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: name });  // throws RangeError for an unknown zone
    } catch (error) {
      return null;
    }
    const lower = name.toLowerCase();
    return listedZones().find((listed) => listed.toLowerCase() === lower) || name;
  }

  function storedZone() {
    try {
      return window.localStorage.getItem(TZ_KEY) || "";
    } catch (error) {  // storage refused (privacy settings, a sandbox)
      return "";
    }
  }

  function storeZone(value) {
    try {
      if (value) window.localStorage.setItem(TZ_KEY, value);
      else window.localStorage.removeItem(TZ_KEY);
    } catch (error) {
      // not kept across visits; this page still shows it
    }
  }

  const DEFAULT_SETTING = (body.dataset.timezone || "").trim();
  const DEFAULT_ZONE = knownZone(DEFAULT_SETTING) || "UTC";
  let TIMEZONE = DEFAULT_ZONE;
  let ZONE_SOURCE = "default";  // "address" (?tz=), "user" (the control) or "default" (Airflow's)
  let CLOCK = null;

  function chooseZone() {
    const ignored = [];
    const candidates = [[params.get("tz"), "address"], [storedZone(), "user"]];
    for (const [value, source] of candidates) {
      if (!value) continue;
      const zone = knownZone(value);
      if (zone) return { zone, source, ignored };
      ignored.push(value);
    }
    return { zone: DEFAULT_ZONE, source: "default", ignored };
  }

  function applyZone() {
    const { zone, source, ignored } = chooseZone();
    TIMEZONE = zone;
    ZONE_SOURCE = source;
    CLOCK = new Intl.DateTimeFormat("en-GB", {
      timeZone: TIMEZONE, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    });
    const label = document.getElementById("timezone");
    label.textContent = `times in ${TIMEZONE}`;
    label.dataset.source = source;
    label.title = (source === "address" ? "from the address (?tz=)" : source === "user" ? "your choice on this page"
      : `Airflow's [core] default_timezone (${DEFAULT_SETTING || "utc"})`) +
      (ignored.length ? `; unknown timezone ignored: ${ignored.join(", ")}` : "");
  }
  applyZone();

  // --- small helpers ------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Number(seconds);
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
    return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }

  function parts(date) {
    return Object.fromEntries(CLOCK.formatToParts(date).map((part) => [part.type, part.value]));
  }

  function when(iso) {
    if (!iso) return "–";
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    const p = parts(date);
    return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
  }

  function clockTime(date) {
    const p = parts(date);
    return `${p.hour}:${p.minute}:${p.second}`;
  }

  function gpuHours(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const hours = Number(seconds) / 3600;
    return hours >= 10 ? hours.toFixed(0) : hours >= 0.01 ? hours.toFixed(2) : "<0.01";
  }

  // A job's kind rides in the query string (?kind=TrainJob): a PyTorchJob and a TrainJob may
  // share a name. Without it the server looks for a PyTorchJob first, so a PyTorchJob's page
  // keeps its plain address.
  function kindQuery(kind) {
    return kind ? `?kind=${encodeURIComponent(kind)}` : "";
  }

  function jobUrl(namespace, name, kind) {
    if (REPORT) return null;  // a file on its own: no page to go to
    const query = new URLSearchParams();
    if (kind && kind !== "PyTorchJob") query.set("kind", kind);
    if (params.get("tz")) query.set("tz", params.get("tz"));  // the zone asked for follows the links
    const suffix = query.toString() ? `?${query.toString()}` : "";
    return `${ROOT}/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}${suffix}`;
  }

  // "disrupted" is both a live state (a running gang losing pods now) and, for a job its task
  // recorded, an end (the task gave the job up after a disruption).
  function ended(state, live) {
    return ENDED.includes(state) || (state === DISRUPTED && live === false);
  }

  // --- disruptions (docs/disruptions.md) ------------------------------------------------------

  const DISRUPTION_SHORT = {
    preempted: "preempted", reclaimed: "reclaimed", node_lost: "node lost", evicted: "evicted",
    deleted: "pods deleted",
  };
  const DISRUPTION_WORDS = {
    preempted: "preempted: Volcano gave its pods to a higher-priority job of its queue",
    reclaimed: "reclaimed: Volcano gave its pods back to another queue's share",
    node_lost: "node lost: a node it ran on stopped answering or went away",
    evicted: "evicted: by the Eviction API (a drain) or by the kubelet under node pressure",
    deleted: "pods deleted without a disruption mark (a person or another controller)",
  };
  const BELOW_GANG = "below its gang size: it holds fewer pods than its minMember";

  function disruptionShort(reason) {
    return DISRUPTION_SHORT[reason] || (reason ? String(reason) : "below its gang size");
  }

  function podCount(count) {
    return `${count} ${Number(count) === 1 ? "pod" : "pods"}`;
  }

  function epoch(iso) {
    const t = iso ? new Date(iso).getTime() : NaN;
    return Number.isNaN(t) ? null : t;
  }

  // The spans a job spent disrupted, waiting to be whole again: a live job's current one (from
  // its first lost pod's mark, or now if none carries a time, to now); a recorded job's episodes
  // (each to its re-admission, else its end, else the job's end).
  function disruptionSpans(job, now, until = now) {
    const d = job.disruption;
    if (d) {
      const pods = (d.pods || []).length ? ` (${d.pods.join(", ")})` : "";
      const title = `${job.name}: disrupted, ${disruptionShort(d.reason)}: ${podCount(d.pods_lost)} lost${pods}` +
        (d.since ? ` since ${when(d.since)}` : "") + (d.requeued ? ", back in the queue" : "") +
        (d.detail ? ` — ${d.detail}` : "");
      return [{ start: epoch(d.since) ?? now, end: now, title }];
    }
    return (job.disruptions || []).map((episode) => {
      const start = epoch(episode.started_at);
      const end = epoch(episode.readmitted_at) ?? epoch(episode.ended_at) ?? epoch(job.finished_at) ?? until;
      const pods = episode.pods || [];
      const nodes = (episode.nodes || []).length ? ` on ${episode.nodes.join(", ")}` : "";
      const back = episode.readmitted_at ? ", until re-admitted" : episode.requeued ? ", not re-admitted" : "";
      const title = `${job.name}: disruption #${episode.number}, ${disruptionShort(episode.reason)}: ` +
        `${podCount(pods.length)} lost${pods.length ? ` (${pods.join(", ")}${nodes})` : ""}` +
        (start !== null ? `, ${duration(Math.max(0, end - start) / 1000)}` : "") + back +
        (episode.detail ? ` — ${episode.detail}` : "");
      return { start, end, title };
    }).filter((span) => span.start !== null);
  }

  // --- a job's time on the charts ---------------------------------------------------------------

  // Live: its objects exist (or, for an entry without the table's row, it has no end yet). A
  // job "ending" is not live: its objects are gone.
  function jobLive(job) {
    if ((job.gang_state || job.state) === ENDING) return false;
    return job.live ?? !job.finished_at;
  }

  // Still growing on a chart: live and unfinished; such a job runs to now.
  function growing(job) {
    return jobLive(job) && !job.finished_at;
  }

  // Where a job's bars end: its end; for a job not live that has no end, the moment it was last
  // seen (never before its last known moment: submission or admission); now while it grows.
  function jobEnd(job, now) {
    const finished = epoch(job.finished_at);
    if (finished !== null) return finished;
    if (growing(job)) return now;
    const known = [job.queued_at, job.admitted_at, job.last_seen_at].map(epoch).filter((t) => t !== null);
    return known.length ? Math.max(...known) : now;
  }

  // Not live, no end: drawn to when it was last seen, with a faded, dashed stub after it.
  function endUnknown(job) {
    return !job.finished_at && !jobLive(job);
  }

  // A live job losing pods now: why, which, since when, whether it is back in its queue.
  function disruptionCard(d, now) {
    const pods = d.pods || [];
    const since = epoch(d.since);
    const entries = [
      ["reason", d.reason ? DISRUPTION_WORDS[d.reason] || String(d.reason) : BELOW_GANG],
      ["pods lost", pods.length ? `${d.pods_lost}: ${pods.join(", ")}` : String(d.pods_lost)],
      ["since", since !== null ? `${when(d.since)} (${duration(Math.max(0, now - since) / 1000)} ago)` : "–"],
      ["queue", d.requeued ? "back in the queue: below its gang size, waiting to be re-admitted"
        : "not requeued: it still holds its gang size"],
      ["detail", d.detail || "–"],
    ];
    return el("div", { class: "card disruption-card", id: "job-disruption" }, el("h3", {}, "What disrupted it"),
      el("dl", {}, entries.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { class: `disruption-${k.replace(" ", "-")}` }, v)])));
  }

  function badge(state, prefix) {
    return el("span", { class: `badge ${prefix || "state"}-${state}` }, state || "–");
  }

  // --- API and errors -------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, kind, message) {
      super(message);
      this.status = status;
      this.kind = kind;
    }
  }

  async function api(path) {
    let response;
    try {
      response = await fetch(`${ROOT}/api${path}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, "network", `the Airflow API server did not answer (${error.message})`);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (error) {
      data = null;
    }
    if (!response.ok) {
      const problem = (data && data.error) || {};
      let message = problem.message;
      if (!message && data && data.detail) {
        message = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
      }
      throw new ApiError(response.status, problem.kind || `http_${response.status}`,
        message || `HTTP ${response.status} ${response.statusText}`);
    }
    return data;
  }

  // Delete, suspend or resume a job (POST /api/jobs/<ns>/<name>/<action>); the server checks
  // the user may change the job's DAG and writes Airflow's audit log.
  async function act(job, action) {
    const path = `/jobs/${encodeURIComponent(job.namespace)}/${encodeURIComponent(job.name)}/${action}${kindQuery(job.kind)}`;
    let response;
    try {
      response = await fetch(`${ROOT}/api${path}`, {
        method: "POST",
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-Requested-By": "gang-jobs-page" },
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, "network", `the Airflow API server did not answer (${error.message})`);
    }
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      const problem = (data && data.error) || {};
      throw new ApiError(response.status, problem.kind || `http_${response.status}`,
        problem.message || (data && data.detail) || `HTTP ${response.status}`);
    }
    return data;
  }

  // "TrainJob team/x", "PyTorchJob team/y": each job by its own kind.
  function what(job) {
    return `${job.kind || "job"} ${job.namespace}/${job.name}`;
  }

  const CONFIRM = {
    delete: (job) => `Delete ${what(job)} and its PodGroup? ` +
      "The Airflow task waiting for it fails (or, with retries left, trains again with a new job).",
    suspend: (job) => `Suspend ${what(job)}? Its pods are deleted; it keeps its place in Airflow.`,
    resume: (job) => `Resume ${what(job)}? It queues for its gang again.`,
  };

  // Airflow's UI frames the page in an iframe sandboxed without allow-modals, where the browser
  // ignores window.confirm() (it answers false at once): there the page asks in a <dialog>.
  function modalsBlocked() {
    try {
      const frame = window.frameElement;  // null when not framed, or framed by another origin
      return Boolean(frame && frame.hasAttribute("sandbox") && !frame.sandbox.contains("allow-modals"));
    } catch (error) {
      return false;
    }
  }

  function confirmAction(message) {
    const dialog = document.getElementById("confirm");
    if (!modalsBlocked() || typeof dialog.showModal !== "function") {
      return Promise.resolve(window.confirm(message));
    }
    document.getElementById("confirm-text").textContent = message;
    dialog.returnValue = "";
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
      dialog.showModal();
      document.getElementById("confirm-cancel").focus();
    });
  }

  function setupConfirm() {
    const dialog = document.getElementById("confirm");
    document.getElementById("confirm-ok").addEventListener("click", () => dialog.close("ok"));
    document.getElementById("confirm-cancel").addEventListener("click", () => dialog.close("cancel"));
  }

  function actionButtons(job, noteId, reload) {
    if (!job.live || !job.managed) return null;
    const finished = job.state === "succeeded" || job.state === "failed";
    const pausable = job.suspendable !== false;
    const choices = job.suspended ? ["resume", "delete"] : finished || !pausable ? ["delete"] : ["suspend", "delete"];
    return el("span", { class: "actions" }, choices.map((action) => {
      const button = el("button", { type: "button", class: action === "delete" ? "danger" : null,
        dataset: { action } }, action);
      button.addEventListener("click", async () => {
        if (!(await confirmAction(CONFIRM[action](job)))) return;
        const note = document.getElementById(noteId);
        try {
          const done = await act(job, action);
          note.textContent = done.message;
          note.hidden = false;
          pinnedError = null;
          hideError();
        } catch (error) {
          showError(error);  // kept until the user acts again: a refresh does not hide it
          pinnedError = error;
          return;
        }
        pinnedError = null;
        reload();
      });
      return button;
    }));
  }

  const TITLES = {
    unreachable: "Kubernetes cluster unreachable.",
    crd_missing: "Required CRDs are not installed.",
    forbidden: "Permission denied by Kubernetes RBAC.",
    unauthorized: "The cluster rejected the connection's credentials.",
    connection: "The Kubernetes connection is not usable.",
    api_error: "The Kubernetes API failed.",
    not_found: "Not found.",
    not_permitted: "Not allowed.",
    not_airflows: "Not an Airflow job.",
    conflict: "Not possible now.",
    bad_request: "Bad request.",
    namespace_not_shown: "Namespace not shown.",
    network: "No answer.",
    internal: "Internal error.",
  };

  function showError(error) {
    const banner = document.getElementById("banner");
    let title = TITLES[error.kind] || `Error (HTTP ${error.status}).`;
    if (error.status === 401) title = "Not signed in to Airflow.";
    if (error.status === 403 && error.kind === "http_403") title = "Airflow refused access.";
    document.getElementById("banner-title").textContent = title;
    document.getElementById("banner-message").textContent = error.message;
    banner.dataset.kind = error.kind;
    banner.hidden = false;
  }

  // A refused action's explanation stays up through the page's refreshes.
  let pinnedError = null;

  function hideError() {
    if (pinnedError) showError(pinnedError);
    else document.getElementById("banner").hidden = true;
  }

  function showWarnings(warnings) {
    const list = clear(document.getElementById("warnings"));
    const unique = [...new Set(warnings.filter(Boolean))];
    for (const warning of unique) list.append(el("li", {}, warning));
    list.hidden = unique.length === 0;
  }

  // --- refresh loop -------------------------------------------------------------------------

  let currentLoad = null;  // the view's loader, to draw it again at once (another timezone)

  async function tick(load) {
    currentLoad = load;
    clearTimeout(timer);
    try {
      await load();
      document.getElementById("refreshed").textContent = `updated ${clockTime(new Date())}`;
    } finally {
      if (!paused) timer = setTimeout(() => tick(load), REFRESH_MS);
    }
  }

  function setupPause(load) {
    const button = document.getElementById("pause");
    button.addEventListener("click", () => {
      paused = !paused;
      button.textContent = paused ? "Resume" : "Pause";
      button.setAttribute("aria-pressed", String(paused));
      if (!paused) tick(load);
      else clearTimeout(timer);
    });
  }

  // --- the timezone control (header) ----------------------------------------------------------

  // The page's address without ?tz= (the user's choice replaces the address's).
  function dropAddressZone() {
    if (!params.has("tz")) return;
    params.delete("tz");
    const query = new URLSearchParams(window.location.search);
    query.delete("tz");
    const rest = query.toString();
    window.history.replaceState(null, "", `${window.location.pathname}${rest ? `?${rest}` : ""}${window.location.hash}`);
  }

  // The links back to the jobs page carry ?tz= as the job links do.
  function homeLinks() {
    const zone = params.get("tz");
    for (const link of document.querySelectorAll("a.brand, a.back")) {
      if (REPORT) link.removeAttribute("href");
      else link.href = `${ROOT}/${zone ? `?tz=${encodeURIComponent(zone)}` : ""}`;
    }
  }

  function setupTimezone() {
    const select = document.getElementById("tz-select");
    const input = document.getElementById("tz-input");
    const zones = document.getElementById("tz-zones");
    const OTHER = "other";
    const defaultLabel = DEFAULT_SETTING.toLowerCase() === "system" ? `this browser's, ${BROWSER_ZONE}` : DEFAULT_ZONE;

    // The options: Airflow's default, UTC, the browser's zone, the zone shown now if it is none
    // of those, and "other zone..." (a text field listing every zone the browser knows).
    function fill() {
      const stored = storedZone();
      let selected = "";
      if (ZONE_SOURCE === "address") selected = TIMEZONE;
      else if (ZONE_SOURCE === "user") selected = stored === BROWSER ? BROWSER : TIMEZONE;
      const choices = [["", `Airflow default (${defaultLabel})`], ["UTC", "UTC"], [BROWSER, `this browser (${BROWSER_ZONE})`]];
      if (selected && !choices.some(([value]) => value === selected)) {
        choices.push([selected, ZONE_SOURCE === "address" ? `${selected} (from the address)` : selected]);
      }
      choices.push([OTHER, "other zone…"]);
      clear(select).append(...choices.map(([value, text]) => el("option", { value }, text)));
      select.value = selected;
    }

    function choose(value) {
      storeZone(value);
      dropAddressZone();
      homeLinks();
      applyZone();
      fill();
      input.hidden = true;
      input.removeAttribute("aria-invalid");
      if (currentLoad) tick(currentLoad);
    }

    select.addEventListener("change", () => {
      if (select.value !== OTHER) {
        choose(select.value);
        return;
      }
      if (!zones.firstChild) zones.append(...listedZones().map((name) => el("option", { value: name })));
      input.hidden = false;
      input.value = "";
      input.focus();
    });
    input.addEventListener("change", () => {
      const zone = knownZone(input.value);
      if (zone) {
        choose(zone);
      } else {
        input.setAttribute("aria-invalid", "true");
        input.title = `unknown timezone: ${input.value}`;
      }
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        input.hidden = true;
        fill();
      }
    });
    fill();
    homeLinks();
  }

  // --- jobs view ------------------------------------------------------------------------------

  const filterForm = document.getElementById("filters");
  const FILTERS = ["namespace", "queue", "state", "dag_id"];

  // The filters as the page's own URL keeps them (a time range stays relative: "24h").
  function currentFilters() {
    const query = new URLSearchParams();
    for (const key of [...FILTERS, "range"]) {
      const value = filterForm.elements[key].value;
      if (value) query.set(key, value);
    }
    if (filterForm.elements.all.checked) query.set("all", "true");
    return query;
  }

  // The same filters for the API: a range becomes "since" that many seconds ago; one page.
  function apiQuery() {
    const query = currentFilters();
    const range = query.get("range");
    query.delete("range");
    if (RANGES[range]) query.set("since", new Date(Date.now() - RANGES[range] * 1000).toISOString());
    query.set("limit", String(PAGE_SIZE));
    query.set("offset", String(offset));
    return query;
  }

  function fillSelect(select, values, selected) {
    const keep = selected || select.value;
    const options = [el("option", { value: "" }, "all")];
    for (const value of [...new Set([...(values || []), ...(keep ? [keep] : [])])]) {
      options.push(el("option", { value }, value));
    }
    clear(select).append(...options);
    select.value = keep || "";
  }

  function airflowCell(airflow) {
    if (!airflow) return el("span", { class: "muted" }, "not from Airflow");
    const text = `${airflow.dag_id} / ${airflow.task_id}` +
      (airflow.map_index >= 0 ? ` [${airflow.map_index}]` : "") +
      (airflow.try_number ? ` · try ${airflow.try_number}` : "");
    if (airflow.task_instance_url) {
      return el("a", { href: airflow.task_instance_url, target: "_top", class: "ti-link" }, text);
    }
    return el("span", { title: "task instance not found in the metadata DB" }, text);
  }

  function jobRow(job) {
    const finished = ENDED.includes(job.state) || !job.live;
    const replicas = finished ? `${job.replicas_total} replicas` : `${job.replicas_running}/${job.replicas_total} running` +
      (job.replicas_bound !== job.replicas_running ? `, ${job.replicas_bound} bound` : "");
    const deleted = job.live ? null : el("span", { class: "deleted", title: "its objects were deleted; as its task recorded it" }, "deleted");
    const reason = [job.reason, job.warning].filter(Boolean).join(" · ");
    return el("tr", { dataset: { job: `${job.namespace}/${job.name}`, kind: job.kind || "", state: job.state, live: String(job.live) } },
      el("td", { class: "name" }, el("a", { href: jobUrl(job.namespace, job.name, job.kind), class: "job-link" }, job.name), deleted),
      el("td", { class: "kind" }, job.kind || "–"),
      el("td", {}, job.namespace),
      el("td", {}, job.queue || "–"),
      el("td", {}, badge(job.state)),
      el("td", { class: "num submitted" }, when(job.queued_at || job.created_at)),
      el("td", {}, job.podgroup_phase || "–"),
      el("td", {}, job.job_condition || "–"),
      el("td", { class: "num", title: JSON.stringify(job.replicas) }, replicas),
      el("td", { class: "num" }, duration(job.queued_seconds)),
      el("td", { class: "num" }, duration(job.run_seconds)),
      el("td", { class: "num gpu-hours", title: job.gpus ? `${job.gpus} GPUs` : "no GPUs" }, gpuHours(job.gpu_seconds)),
      el("td", { class: "reason", title: reason }, el("span", {}, reason)),
      el("td", {}, airflowCell(job.airflow)),
      el("td", {}, actionButtons(job, "rows-action-note", () => tick(loadJobsView))));
  }

  function renderPager(data) {
    const first = data.total ? data.offset + 1 : 0;
    const last = Math.min(data.offset + data.jobs.length, data.total);
    document.getElementById("page-range").textContent = `${first}–${last} of ${data.total}`;
    document.getElementById("prev-page").disabled = data.offset <= 0;
    document.getElementById("next-page").disabled = last >= data.total;
  }

  function renderJobs(data) {
    fillSelect(filterForm.elements.namespace, data.namespaces);
    fillSelect(filterForm.elements.queue, data.queues);
    fillSelect(filterForm.elements.state, data.states);
    fillSelect(filterForm.elements.dag_id, data.dag_ids);
    const tbody = clear(document.querySelector("#jobs-table tbody"));
    tbody.append(...data.jobs.map(jobRow));
    document.getElementById("job-count").textContent = `(${data.total}, ${data.live} live)`;
    document.getElementById("no-jobs").hidden = data.total > 0;
    renderPager(data);
  }

  const GPU = "nvidia.com/gpu";

  function resources(map) {
    return Object.entries(map || {}).map(([k, v]) => `${k === GPU ? "GPUs" : k}: ${v}`).join(", ") || "–";
  }

  function renderQueues(data) {
    const box = clear(document.getElementById("queues"));
    const cluster = data.cluster || {};
    if (Object.keys(cluster).length) {
      const line = (key) => Object.entries(cluster).map(([name, use]) =>
        `${name === GPU ? "GPUs" : name}: ${use[key] ?? "?"}`).join(", ");
      box.append(el("div", { class: "card cluster", dataset: { queue: "" } },
        el("h3", {}, "Cluster"),
        el("dl", {},
          el("dt", {}, "allocatable"), el("dd", { class: "cluster-allocatable" }, line("allocatable")),
          el("dt", {}, "allocated"), el("dd", { class: "cluster-allocated" }, line("allocated")),
          el("dt", {}, "free"), el("dd", { class: "cluster-free" }, line("free")))));
    }
    for (const queue of data.queues) {
      const counts = Object.entries(queue.podgroups).filter(([, n]) => n > 0)
        .map(([phase, n]) => `${n} ${phase}`).join(", ") || "none";
      const entries = [
        ["capability", queue.capability && Object.keys(queue.capability).length ? resources(queue.capability) : "unlimited"],
        queue.deserved ? ["deserved", resources(queue.deserved)] : null,
        queue.guarantee ? ["guarantee", resources(queue.guarantee)] : null,
        ["allocated", resources(queue.allocated)],
        ["waiting gangs need", queue.waiting_gangs ? `${resources(queue.pending)} (${queue.waiting_gangs} ${queue.waiting_gangs === 1 ? "gang" : "gangs"})` : "–"],
        ["free to it", resources(queue.free)],
        ["PodGroups", counts],
      ].filter(Boolean);
      box.append(el("div", { class: "card queue", dataset: { queue: queue.name } },
        el("h3", {}, queue.name, " ", badge(queue.state, "queue")),
        el("dl", {}, entries.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { class: `queue-${k.replaceAll(" ", "-")}` }, v)]))));
    }
  }

  // Each waiting gang's place in its queue (Volcano's order), under the row's reason.
  function renderPositions(data) {
    const places = new Map((data.waiting || []).map((gang) => [`${gang.namespace}/${gang.name}`, gang]));
    for (const row of document.querySelectorAll("#jobs-table tbody tr")) {
      const gang = places.get(row.dataset.job);
      const cell = row.querySelector("td.reason");
      if (!gang || !cell || row.dataset.state !== "queued") continue;
      cell.append(el("div", { class: "position" }, gang.summary));
    }
  }

  // One chart per queue: a row per job, grey while queued, then coloured by outcome.
  // The axis runs from the first submission to now while a job on it still grows (live and
  // unfinished), else to the latest moment of its jobs: a chart of ended jobs stops growing.
  function timelineChart(queue, jobs, now, single) {
    const moments = (job) => [job.queued_at, job.admitted_at, job.finished_at, job.last_seen_at]
      .map(epoch).filter((t) => t !== null);
    const open = jobs.some(growing);
    const origin = Math.min(...jobs.map((job) => new Date(job.queued_at).getTime()));
    const end = open ? now : Math.max(...jobs.flatMap(moments));
    const span = Math.max(end - origin, 1000);
    const row = 24, label = single ? 10 : 230, width = 1000, top = 8, plot = width - label - 20;
    const stub = 16;  // the faded, dashed end of a job whose end is unknown (fits the right margin)
    const height = top + row * jobs.length + 30;
    const x = (t) => label + plot * Math.max(0, Math.min(1, (t - origin) / span));
    const chart = svg("svg", {
      viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `timeline of queue ${queue}`,
      class: "timeline-svg", "data-queue": queue, "data-open": String(open),
      "data-start": new Date(origin).toISOString(), "data-end": new Date(origin + span).toISOString(),
    });
    const step = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]
      .find((s) => span / 1000 / s <= 8) || 86400;
    for (let t = 0; t * 1000 <= span; t += step) {
      const tx = label + (plot * t * 1000) / span;
      chart.append(svg("line", { x1: tx, x2: tx, y1: top - 4, y2: height - 22, class: "grid-line" }));
      chart.append(svg("text", { x: tx, y: height - 8, "text-anchor": "middle" }, duration(t).replace(".0s", "s")));
    }
    if (open) {
      chart.append(svg("line", { x1: x(now), x2: x(now), y1: top - 4, y2: height - 22, class: "now-line" }));
    }
    jobs.forEach((job, index) => {
      const y = top + index * row;
      const queued = new Date(job.queued_at).getTime();
      const admitted = epoch(job.admitted_at);
      const live = jobLive(job);
      const unknown = endUnknown(job);
      const last = jobEnd(job, now);
      const link = svg("a", {
        href: jobUrl(job.namespace, job.name, job.kind), "data-job": `${job.namespace}/${job.name}`,
        "data-end": unknown ? "unknown" : null,
      });
      if (!single) {
        link.append(svg("text", { x: label - 8, y: y + 16, "text-anchor": "end", class: "label" }, job.name));
      }
      const state = job.gang_state || job.state;
      if (state === "stuck") {  // no gang: part of its pods hold GPUs while the rest wait
        link.append(svg("rect", {
          x: x(queued), y: y + 4, width: Math.max(x(last) - x(queued), 2), height: row - 8, class: "bar bar-stuck",
        }, svg("title", {}, `${job.name}: ${job.reason || "stuck"}`)));
        chart.append(link);
        return;
      }
      const queuedEnd = admitted ?? last;
      // A gang never admitted ends in its own colour (admission timeout, killed...), else grey.
      const waitClass = !admitted && ended(state, live) ? state : "queued";
      link.append(svg("rect", {
        x: x(queued), y: y + 4, width: Math.max(x(queuedEnd) - x(queued), 2), height: row - 8,
        class: `bar bar-${waitClass}`,
      }, svg("title", {}, `${job.name}: ${waitClass === "queued" ? "queued" : state} ${duration(((queuedEnd) - queued) / 1000)}` +
        (job.reason && !admitted ? ` — ${job.reason}` : ""))));
      // Its run; for a job whose end is unknown only as far as it was seen running.
      if (admitted !== null && !(unknown && last <= admitted)) {
        const runClass = ended(state, live) ? state : "running";
        link.append(svg("rect", {
          x: x(admitted), y: y + 4, width: Math.max(x(last) - x(admitted), 2), height: row - 8,
          class: `bar bar-${runClass}`,
        }, svg("title", {}, `${job.name}: ${runClass} ${duration((last - admitted) / 1000)}`)));
      }
      // Disrupted: waiting again, hatched over the run (inset, so the run's colour shows round it).
      for (const span of disruptionSpans(job, now, last)) {
        const from = Math.max(span.start, admitted || queued);
        const to = Math.max(span.end, from);
        link.append(svg("rect", {
          x: x(from), y: y + 7, width: Math.max(x(to) - x(from), 3), height: row - 14, class: "bar bar-disruption",
        }, svg("title", {}, span.title)));
      }
      if (unknown) {
        const seen = job.last_seen_at ? `last seen ${when(job.last_seen_at)}` : `not seen after ${when(new Date(last).toISOString())}`;
        link.append(svg("rect", {
          x: x(last), y: y + 4, width: stub, height: row - 8, class: "bar bar-end-unknown",
        }, svg("title", {}, `${job.name}: ${state}, end unknown — ${seen}`)));
      }
      chart.append(link);
    });
    return chart;
  }

  // The timeline's entries with what the jobs table knows of the same jobs: live or recorded,
  // its kind, when it was last seen, the disruption a live one is in, the episodes a recorded
  // one went through.
  function withRows(entries, rows) {
    const byJob = new Map(rows.map((row) => [`${row.namespace}/${row.name}`, row]));
    return entries.map((entry) => {
      const row = byJob.get(`${entry.namespace}/${entry.name}`);
      return row ? {
        ...entry, live: row.live, kind: entry.kind ?? row.kind, last_seen_at: entry.last_seen_at ?? row.last_seen_at ?? null,
        disruption: row.disruption, disruptions: row.disruptions,
      } : entry;
    });
  }

  function renderTimelines(data, rows) {
    const box = clear(document.getElementById("timelines"));
    const now = new Date(data.now).getTime();
    if (!data.queues.length) box.append(el("p", { class: "muted" }, "No jobs to draw."));
    for (const entry of data.queues) {
      box.append(el("div", { class: "timeline", dataset: { queue: entry.queue } },
        el("h3", {}, `Queue ${entry.queue}`, " ", el("span", { class: "muted" }, `(${entry.jobs.length} jobs)`)),
        timelineChart(entry.queue, withRows(entry.jobs, rows), now, false)));
    }
  }

  async function loadJobsView() {
    const suffix = `?${apiQuery().toString()}`;
    const [jobs, queues, timeline] = await Promise.allSettled([
      api(`/jobs${suffix}`), api("/queues"), api(`/timeline${suffix}`),
    ]);
    const failures = [jobs, queues, timeline].filter((r) => r.status === "rejected").map((r) => r.reason);
    if (jobs.status === "fulfilled") renderJobs(jobs.value);
    if (queues.status === "fulfilled") renderQueues(queues.value);
    if (jobs.status === "fulfilled" && queues.status === "fulfilled") renderPositions(queues.value);
    if (timeline.status === "fulfilled") {
      renderTimelines(timeline.value, jobs.status === "fulfilled" ? jobs.value.jobs : []);
    }
    const warnings = [jobs, queues, timeline].filter((r) => r.status === "fulfilled")
      .flatMap((r) => r.value.warnings || []);
    showWarnings(warnings);
    if (failures.length) showError(failures[0]);
    else hideError();
  }

  function startJobsView() {
    document.getElementById("jobs-view").hidden = false;
    for (const key of FILTERS) {
      const value = params.get(key);
      if (value) fillSelect(filterForm.elements[key], [], value);
    }
    if (RANGES[params.get("range")]) filterForm.elements.range.value = params.get("range");
    filterForm.elements.all.checked = params.get("all") === "true";
    filterForm.addEventListener("change", () => {
      offset = 0;
      const filters = currentFilters();
      if (params.get("tz")) filters.set("tz", params.get("tz"));
      const query = filters.toString();
      window.history.replaceState(null, "", `${window.location.pathname}${query ? `?${query}` : ""}`);
      tick(loadJobsView);
    });
    document.getElementById("prev-page").addEventListener("click", () => {
      offset = Math.max(0, offset - PAGE_SIZE);
      tick(loadJobsView);
    });
    document.getElementById("next-page").addEventListener("click", () => {
      offset += PAGE_SIZE;
      tick(loadJobsView);
    });
    setupPause(loadJobsView);
    tick(loadJobsView);
  }

  // --- job view -------------------------------------------------------------------------------

  function table(node, headers, rows) {
    clear(node);
    node.append(el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))));
    const tbody = el("tbody", {});
    for (const row of rows) tbody.append(el("tr", {}, row.map((cell) => el("td", {}, cell ?? "–"))));
    if (!rows.length) tbody.append(el("tr", {}, el("td", { colspan: headers.length, class: "muted" }, "none")));
    node.append(tbody);
  }

  function card(title, entries) {
    return el("div", { class: "card" }, el("h3", {}, title),
      el("dl", {}, entries.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v ?? "–")])));
  }

  function renderJob(data) {
    const job = data.job;
    document.title = `${job.name} · Gang jobs`;
    document.getElementById("job-title").textContent = `${job.namespace}/${job.name}`;
    const state = document.getElementById("job-state");
    state.textContent = job.state;
    state.className = `badge state-${job.state}`;
    clear(document.getElementById("job-cards")).append(
      card("Gang", [["kind", job.kind], ["queue", job.queue], ["PodGroup", job.podgroup_phase], ["gang size", job.min_member],
        ["scheduling", job.gang_scheduling]]),
      card("Job", [["condition", job.job_condition], ["replicas", Object.entries(job.replicas).map(([k, v]) => `${v} ${k}`).join(", ")],
        ["running", job.live ? `${job.replicas_running}/${job.replicas_total}` : "–"],
        ["bound", job.live ? `${job.replicas_bound}/${job.replicas_total}` : "–"]]),
      card("Time", [["submitted", when(job.queued_at)], ["queued", duration(job.queued_seconds)],
        ["ran", duration(job.run_seconds)], ["finished", when(job.finished_at)],
        endUnknown(job) ? ["last seen", when(job.last_seen_at)] : null,
        ["GPU-hours", gpuHours(job.gpu_seconds)]].filter(Boolean)),
    );
    if (job.failed_replica || job.exit_code !== undefined && job.exit_code !== null) {
      document.getElementById("job-cards").append(card("Failure", [["replica", job.failed_replica], ["exit code", job.exit_code]]));
    }
    if (job.position) {
      document.getElementById("job-cards").append(
        el("div", { class: "card position-card" }, el("h3", {}, "Place in queue"), el("p", { id: "job-position" }, job.position.summary)));
    }
    const now = new Date(data.generated_at).getTime();
    if (job.disruption) {
      document.getElementById("job-cards").append(disruptionCard(job.disruption, now));
    } else if (job.reason) {
      document.getElementById("job-cards").append(
        el("div", { class: "card reason-card" }, el("h3", {}, job.state === ENDING ? "How it is ending"
          : ended(job.state, job.live) ? "How it ended" : job.state === "stuck" ? "Why it is stuck" : "Why it waits"),
          el("p", { id: "job-reason" }, job.reason)));
    }

    const airflow = document.getElementById("job-airflow");
    clear(airflow);
    if (data.airflow) {
      const ti = data.airflow.task_instance;
      airflow.append(el("p", {}, airflowCell(data.airflow),
        ti && ti.state ? el("span", { class: "muted" }, ` — task state ${ti.state}, try ${ti.try_number}`) : null,
        data.airflow.dag_url ? el("span", {}, " · ", el("a", { href: data.airflow.dag_url, target: "_top" }, "DAG")) : null));
      for (const waiter of data.airflow.waited_by || []) {
        const text = `${waiter.dag_id} / ${waiter.task_id}` + (waiter.map_index >= 0 ? ` [${waiter.map_index}]` : "");
        airflow.append(el("p", { class: "waiter" }, "waited for by the sensor ",
          el("a", { href: waiter.task_instance_url, target: "_top", class: "waiter-link" }, text),
          el("span", { class: "muted" }, ` — task state ${waiter.state || "unknown"}`)));
      }
    } else {
      airflow.append(el("p", { class: "muted" }, `This ${job.kind || "job"} was not submitted by Airflow.`));
    }

    clear(document.getElementById("job-actions")).append(
      actionButtons(job, "action-note", () => tick(loadJobView)) || "");
    const recorded = data.recorded;
    const note = document.getElementById("recorded-note");
    note.hidden = !recorded;
    note.textContent = recorded ? `Deleted: ${recorded.message} (recorded ${when(recorded.recorded_at)}).` : "";
    for (const section of document.querySelectorAll(".cluster-only")) section.hidden = Boolean(recorded);
    document.getElementById("section-log").hidden = !(recorded && recorded.log_tail);
    document.getElementById("job-log").textContent = (recorded && recorded.log_tail) || "";

    const progress = clear(document.getElementById("job-progress"));
    const hasProgress = Boolean(data.progress && data.progress.value !== null && data.progress.value !== undefined);
    document.getElementById("section-progress").hidden = Boolean(recorded) && !hasProgress;
    if (data.progress && data.progress.value !== null && data.progress.value !== undefined) {
      progress.append(el("pre", { class: "progress", id: "progress-value" }, JSON.stringify(data.progress.value, null, 2)));
    } else {
      progress.append(el("p", { class: "muted", id: "progress-reason" }, (data.progress && data.progress.reason) || "not available"));
    }

    const timelineBox = clear(document.getElementById("job-timeline"));
    if (data.timeline) {
      const entry = { ...data.timeline, gang_state: job.state, reason: job.reason, live: job.live, kind: job.kind,
        last_seen_at: data.timeline.last_seen_at ?? job.last_seen_at ?? null,
        disruption: job.disruption, disruptions: job.disruptions };
      timelineBox.append(el("div", { class: "timeline" }, timelineChart(job.queue || "-", [entry], now, true)));
    }

    // The episodes its task recorded (a job whose objects are gone).
    const episodes = job.disruptions || [];
    document.getElementById("section-disruptions").hidden = episodes.length === 0;
    table(document.getElementById("job-disruptions"), ["#", "Reason", "Pods", "Nodes", "Started", "Re-admitted", "Lasted", "Detail"],
      episodes.map((d) => {
        const start = epoch(d.started_at);
        const end = epoch(d.readmitted_at) ?? epoch(d.ended_at) ?? epoch(job.finished_at);
        return [d.number, disruptionShort(d.reason), (d.pods || []).join(", ") || null, (d.nodes || []).join(", ") || null,
          when(d.started_at), d.readmitted_at ? when(d.readmitted_at) : d.requeued ? "not re-admitted" : "not requeued",
          start !== null && end !== null ? duration(Math.max(0, end - start) / 1000) : null, d.detail || null];
      }));

    const podgroup = clear(document.getElementById("job-podgroup"));
    if (data.podgroup) {
      const pg = data.podgroup;
      podgroup.append(card(pg.name, [["phase", pg.phase], ["queue", pg.queue], ["minMember", pg.min_member],
        ["running", pg.running], ["succeeded", pg.succeeded], ["failed", pg.failed],
        ["Unschedulable", pg.unschedulable]]));
      const conditions = el("table", { class: "grid" });
      table(conditions, ["Type", "Status", "Reason", "Message", "Since"],
        pg.conditions.map((c) => [c.type, c.status, c.reason, c.message, when(c.last_transition_time)]));
      podgroup.append(conditions);
    } else {
      podgroup.append(el("p", { class: "muted" }, "No PodGroup (gang scheduling disabled, not created yet, or deleted with the job)."));
    }

    table(document.getElementById("job-conditions"), ["Type", "Status", "Reason", "Message", "Since"],
      data.conditions.map((c) => [c.type, c.status, c.reason, c.message, when(c.last_transition_time)]));
    table(document.getElementById("job-replicas"), ["Replica type", "Desired", "Active", "Succeeded", "Failed"],
      data.replicas.map((r) => [r.type, r.desired, r.active, r.succeeded, r.failed]));
    table(document.getElementById("job-pods"), ["Pod", "Replica", "Phase", "Node", "Restarts", "Exit code", "Reason"],
      data.pods.map((p) => [p.name, `${p.replica_type || "?"} ${p.replica_index ?? ""}`, p.phase, p.node || "unbound",
        p.restarts, p.exit_code, p.reason || p.unschedulable]));
    table(document.getElementById("job-events"), ["Last seen", "Object", "Type", "Reason", "Message", "Count"],
      data.events.map((e) => [when(e.last_seen), `${e.object_kind || ""} ${e.object_name || ""}`, e.type, e.reason, e.message, e.count]));
    table(document.getElementById("job-labels"), ["Label", "Value"], Object.entries(data.labels));
    showWarnings(data.warnings || []);
  }

  async function loadJobView() {
    const kind = new URLSearchParams(window.location.search).get("kind");
    const path = `/jobs/${encodeURIComponent(body.dataset.namespace)}/${encodeURIComponent(body.dataset.name)}${kindQuery(kind)}`;
    try {
      renderJob(await api(path));
      hideError();
    } catch (error) {
      showError(error);
    }
  }

  function startJobView() {
    document.getElementById("job-view").hidden = false;
    if (window.location.hash === "#kubernetes-dashboard-not-configured") {
      const note = document.getElementById("action-note");
      note.textContent = "No Kubernetes dashboard is configured for this Airflow, so the task's " +
        "\"Kubernetes dashboard\" button opens this page. An administrator sets [gang] " +
        "dashboard_url_template (placeholders {namespace} and {name}) " +
        "to point it at one.";
      note.hidden = false;
    }
    document.getElementById("job-title").textContent = `${body.dataset.namespace}/${body.dataset.name}`;
    setupPause(loadJobView);
    tick(loadJobView);
  }

  // --- report view: a report's timeline, embedded in its file ------------------------------------

  function startReportView() {
    const report = JSON.parse(document.getElementById("gang-report-data").textContent);
    document.getElementById("jobs-view").hidden = false;
    document.title = report.title;
    paused = true;  // drawn once, again only for another timezone: nothing to refresh
    tick(() => {
      document.getElementById("report-about").textContent = `${report.title} (written ${when(report.timeline.now)})`;
      renderTimelines(report.timeline, []);
      showWarnings(report.timeline.warnings || []);
    });
  }

  setupTimezone();
  setupConfirm();
  if (REPORT) startReportView();
  else if (VIEW === "job") startJobView();
  else startJobsView();
})();
