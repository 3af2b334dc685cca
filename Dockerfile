# syntax=docker/dockerfile:1
# The kgw image: one image for the gateway (`kgw server`, ECS) and the agent (`kgw agent`, the
# tenant's cluster). Multi-stage: TypeScript is compiled and bundled in `build`
# (scripts/bundle.mjs: dist/bundle/, every dependency inside), and the final stage holds only
# Node.js and that bundle, running as UID 65532 (the agent manifest's runAsUser,
# lib/tenancy/manifest). No node_modules: the bundle needs none.
# Built by `cdk deploy` as an image asset, or by hand: docker build -t kgw:0.1.0 .

# Node.js 24 LTS, the supported runtime and the version .ci/run tests on (maintenance LTS until
# 2028-04-30), on Debian 13 "trixie", which the Node image itself defaults to (Debian 12 left
# regular security support in June 2026). Pinned by exact version but not by digest: the machines
# this repository is developed on cannot reach Docker Hub to resolve one, and a digest is never
# written from memory. A release build pins it with
#   --build-arg NODE_IMAGE=node:24.22.3-trixie-slim@sha256:<digest>
# <digest> being the index digest (every architecture) that
# `docker buildx imagetools inspect node:24.22.3-trixie-slim` prints.
ARG NODE_IMAGE=node:24.22.3-trixie-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are here; the build runs below.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/bundle.mjs ./scripts/
COPY lib ./lib
COPY services ./services
RUN npm run build

FROM ${NODE_IMAGE} AS runtime
# npm, npx, corepack and yarn are build tools: the running gateway needs none of them.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
    /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* \
    /usr/local/bin/yarn /usr/local/bin/yarnpkg \
  && groupadd --gid 65532 nonroot \
  && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
WORKDIR /opt/kgw
ENV NODE_ENV=production
COPY --from=build /src/dist/bundle ./dist/bundle
COPY package.json ./
COPY bin ./bin
RUN chmod 0755 bin/kgw.js && ln -s /opt/kgw/bin/kgw.js /usr/local/bin/kgw
# Node's compile cache, built in: a restarted gateway reuses V8's compiled code of the bundle
# instead of compiling it again (bin/kgw.js; docs/PERFORMANCE.md, `startup`). The
# root filesystem is read-only at run time (ECS and the agent manifest), so it is filled here. Node
# keys the cache by the UID that runs it, so it is filled as 65532, then handed to root: the
# gateway reads it and can never rewrite it.
ENV NODE_COMPILE_CACHE=/opt/kgw/compile-cache
RUN --mount=type=bind,source=scripts/fill-compile-cache.mjs,target=/tmp/fill-compile-cache.mjs \
  install -d -o 65532 -g 65532 "$NODE_COMPILE_CACHE" \
  && setpriv --reuid=65532 --regid=65532 --clear-groups node /tmp/fill-compile-cache.mjs /opt/kgw/dist/bundle \
  && chown -R root:root "$NODE_COMPILE_CACHE"
USER 65532:65532
# 8132 gateway (agents and callers), 8133 admin, 8134 health, 8135 peer, 8443 install route.
EXPOSE 8132 8133 8134 8135 8443
# /healthz of `kgw server` (8134) by default; for `kgw agent` set KGW_HEALTH_URL to its health
# port (http://127.0.0.1:8093/healthz). ECS and Kubernetes use their own probes instead.
ENV KGW_HEALTH_URL=http://127.0.0.1:8134/healthz
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.KGW_HEALTH_URL).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["kgw"]
CMD ["--help"]
