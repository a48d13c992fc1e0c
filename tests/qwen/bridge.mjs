// Differential-test bridge: runs a batch of calls into the real Qwen Code package.
//
// argv[2]: the installed package folder (node_modules/@qwen-code/qwen-code).
// stdin: JSON {"cases": [{"op": ..., ...}, ...]}; stdout: JSON {"results": [...]}, one per case.
// Functions are found by the name a chunk exports, never by the chunk's (hashed) file name.
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const packageDir = resolve(process.argv[2]);
const chunksDir = join(packageDir, "chunks");
const chunkFiles = readdirSync(chunksDir).filter((name) => name.endsWith(".js"));
const exportCache = new Map();

function exportBlockNames(text) {
  const names = new Set();
  for (const block of text.matchAll(/^export \{([^}]*)\};?/gm)) {
    for (const item of block[1].split(",")) {
      const parts = item.trim().split(/\s+as\s+/);
      const name = (parts[1] ?? parts[0]).trim();
      if (name) names.add(name);
    }
  }
  return names;
}

let exportIndex = null;

function buildExportIndex() {
  const index = new Map();
  for (const file of chunkFiles) {
    const text = readFileSync(join(chunksDir, file), "utf8");
    for (const name of exportBlockNames(text)) if (!index.has(name)) index.set(name, file);
  }
  return index;
}

async function findExport(name) {
  if (exportCache.has(name)) return exportCache.get(name);
  exportIndex ??= buildExportIndex();
  const file = exportIndex.get(name);
  if (file === undefined) throw new Error(`no chunk exports ${name}`);
  const module = await import(pathToFileURL(join(chunksDir, file)).href);
  exportCache.set(name, module[name]);
  return module[name];
}

function setEnv(env) {
  for (const key of Object.keys(process.env)) delete process.env[key];
  Object.assign(process.env, env);
}

async function runPaths(c) {
  const Storage = await findExport("Storage");
  const getAutoMemoryRoot = await findExport("getAutoMemoryRoot");
  const getUserAutoMemoryRoot = await findExport("getUserAutoMemoryRoot");
  const getTeamAutoMemoryRoot = await findExport("getTeamAutoMemoryRoot");
  Storage.setRuntimeBaseDir(null);
  if (c.settings) {
    // what the CLI does at start (loadSettings, then loadCliConfig's setRuntimeBaseDir)
    const loadSettings = await findExport("loadSettings");
    const settings = loadSettings(c.cwd);
    Storage.setRuntimeBaseDir(settings.merged.advanced?.runtimeOutputDir, c.cwd);
  }
  return {
    auto: getAutoMemoryRoot(c.project),
    user: getUserAutoMemoryRoot(),
    team: getTeamAutoMemoryRoot(c.project),
  };
}

async function runSecrets(c) {
  const scanForSecrets = await findExport("scanForSecrets");
  return c.texts.map((text) => scanForSecrets(text).map((m) => m.ruleId));
}

async function runIndex(c) {
  if (c.tier === "user") {
    const rebuildUserAutoMemoryIndex = await findExport("rebuildUserAutoMemoryIndex");
    return await rebuildUserAutoMemoryIndex();
  }
  const rebuildManagedAutoMemoryIndex = await findExport("rebuildManagedAutoMemoryIndex");
  return await rebuildManagedAutoMemoryIndex(c.project);
}

// Qwen does not export its team index builder (rebuildTeamAutoMemoryIndex): it is taken from
// the source modules esbuild bundled (found by their "// packages/..." heading, never by the
// chunk's file name) and run with their imports and the other chunks' exports in scope.
const TEAM_MODULES = ["types", "scan", "indexer"].map((m) => `packages/core/src/memory/${m}.ts`);
let teamIndexBuilder = null;

function moduleSection(text, modulePath) {
  const heading = `\n// ${modulePath}\n`;
  const start = text.indexOf(heading);
  if (start < 0) return null;
  const end = text.indexOf("\n// ", start + heading.length);
  return text.slice(start + heading.length, end < 0 ? undefined : end);
}

async function moduleImports(source, scope) {
  const pattern = /^import (?:\* as (\w+)|\{([^}]*)\}) from "([^"]+)";$/gm;
  for (const [, star, named, from] of source.matchAll(pattern)) {
    const module = await import(from);
    if (star) scope.set(star, module);
    for (const item of (named ?? "").split(",").filter((x) => x.trim())) {
      const [name, alias] = item.trim().split(/\s+as\s+/);
      scope.set(alias ?? name, module[name]);
    }
  }
  return source.replace(pattern, "");
}

async function loadTeamIndexBuilder() {
  const sections = [];
  for (const modulePath of TEAM_MODULES) {
    const file = chunkFiles.find((name) =>
      readFileSync(join(chunksDir, name), "utf8").includes(`\n// ${modulePath}\n`),
    );
    if (file === undefined) throw new Error(`no chunk bundles ${modulePath}`);
    sections.push(moduleSection(readFileSync(join(chunksDir, file), "utf8"), modulePath));
  }
  const scope = new Map([["__name", (f) => f], ["init_esbuild_shims", () => {}]]);
  let body = "";
  for (const section of sections) body += (await moduleImports(section, scope)) + "\n";
  const declared = new Set(
    [...body.matchAll(/^(?:async )?(?:function|var|let|const|class) (\w+)/gm)].map((m) => m[1]),
  );
  exportIndex ??= buildExportIndex();
  for (const [name] of body.matchAll(/[A-Za-z_$][\w$]*/g)) {
    if (!declared.has(name) && !scope.has(name) && !(name in globalThis) && exportIndex.has(name)) {
      scope.set(name, await findExport(name));
    }
  }
  const proxy = new Proxy(Object.create(null), {
    has: (_, name) => scope.has(name),
    get: (_, name) => scope.get(name),
  });
  const make = new Function("scope", `with (scope) {\n${body}\nreturn rebuildTeamAutoMemoryIndex;\n}`);
  return make(proxy);
}

async function runTeamIndex(c) {
  teamIndexBuilder ??= await loadTeamIndexBuilder();
  return await teamIndexBuilder(c.project);
}

function runCollate(c) {
  return [...c.strings].sort((a, b) => a.localeCompare(b));
}

const OPS = {
  paths: runPaths,
  secrets: runSecrets,
  index: runIndex,
  teamIndex: runTeamIndex,
  collate: runCollate,
};

async function main() {
  const request = JSON.parse(readFileSync(0, "utf8"));
  const home = process.env["HOME"];
  const results = [];
  for (const c of request.cases) {
    setEnv({ HOME: home, ...(c.env ?? {}) });
    if (c.cwd) process.chdir(c.cwd);
    try {
      results.push({ ok: await OPS[c.op](c) });
    } catch (error) {
      results.push({ error: String(error?.stack ?? error) });
    }
  }
  process.stdout.write(JSON.stringify({ results }));
}

await main();
