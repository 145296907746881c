// Gang jobs page: light or dark, as the user's Airflow is. Loaded in <head>, before the body is
// drawn, so the page never flashes the other palette. Sets data-theme="light"|"dark" on the
// root element (gang.css holds the two palettes) and data-theme-source="airflow"|"browser".
//
// Framed by Airflow's UI (an external view with url_route: a same-origin iframe), it follows
// Airflow's theme: Airflow 3's UI (Chakra UI with next-themes) marks it on its own root element,
// with the CSS color-scheme property ("dark"/"light") and a class of the same name; a
// MutationObserver on that element follows the user's switch. Not framed, or framed by a page
// it cannot read (another origin: reading it throws), the browser's prefers-color-scheme.
(function () {
  "use strict";

  const root = document.documentElement;
  const media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  // The parent document's root element, when there is a parent and it may be read.
  function parentRoot() {
    try {
      if (!window.parent || window.parent === window) return null;
      const node = window.parent.document.documentElement;  // throws across origins
      return node || null;
    } catch (error) {
      return null;
    }
  }

  // "dark" or "light" as the parent's root says it, else null (a parent that is not Airflow's
  // UI, or one that leaves the choice to the browser: "normal", "light dark").
  function parentTheme(node) {
    try {
      const scheme = String(window.parent.getComputedStyle(node).colorScheme || "")
        .split(/\s+/).filter((word) => word && word !== "only");
      if (scheme.length === 1 && (scheme[0] === "dark" || scheme[0] === "light")) return scheme[0];
      if (node.classList.contains("dark")) return "dark";
      if (node.classList.contains("light")) return "light";
    } catch (error) {
      // a parent gone or navigated away meanwhile: the browser decides
    }
    return null;
  }

  function browserTheme() {
    return media && media.matches ? "dark" : "light";
  }

  function apply() {
    const node = parentRoot();
    const airflow = node ? parentTheme(node) : null;
    const theme = airflow || browserTheme();
    if (root.dataset.theme !== theme) root.dataset.theme = theme;
    const source = airflow ? "airflow" : "browser";
    if (root.dataset.themeSource !== source) root.dataset.themeSource = source;
  }

  apply();
  const framing = parentRoot();
  if (framing) {
    try {
      new MutationObserver(apply).observe(framing, { attributes: true, attributeFilter: ["class", "style"] });
    } catch (error) {
      // cannot observe it: the browser's preference still applies below
    }
  }
  if (media) {
    if (media.addEventListener) media.addEventListener("change", apply);
    else if (media.addListener) media.addListener(apply);
  }
})();
