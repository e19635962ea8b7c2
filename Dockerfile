# syntax=docker/dockerfile:1
# The `raptor` server image.
#
#   Build:  docker build -t raptor \
#             --build-arg VERSION="$(git describe --tags --always)" \
#             --build-arg REVISION="$(git rev-parse HEAD)" \
#             --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#   Run:    docker compose up        (docker-compose.yml: Postgres, stripe-mock and this image)
#
# No Docker engine runs on the project's development and CI machines, so this file is checked by
# reading, not by building: each stage names what it copies and why. The steps it runs are the
# ones the project runs itself (cargo build --release --locked, npm ci --omit=dev), plus
# cargo-chef's prepare/cook. Base images are pinned by version; bump them together with the
# toolchain in Cargo.toml's rust-version.
#
# Stages:
#   chef         the Rust toolchain with cargo-chef
#   planner      the dependency recipe (recipe.json) of the workspace: changes only when a
#                Cargo.toml or Cargo.lock does
#   build        cooks (builds) the dependencies from the recipe (a cached layer while only our
#                code changes), then builds the raptor binary
#   docs-assets  Swagger UI's files for /docs, from the npm lock file
#   (final)      Debian slim with CA certificates, the binary and the assets, as a numeric user

FROM rust:1.95.0-bookworm AS chef
RUN cargo install --locked cargo-chef@0.1.78
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
# Dependencies only: this layer is reused until the recipe changes.
RUN cargo chef cook --release --locked --recipe-path recipe.json -p raptor-server --bin raptor
COPY . .
# The build's identity for `raptor_build_info{version, git_sha}`, `raptor --version` and the
# traces' service.version (crates/raptor-server/build.rs): the image has no .git, so the commit
# and the release's tag come in as build arguments (empty: the crate's version, `unknown`).
ARG VERSION=""
ARG REVISION=""
# [profile.release] in Cargo.toml strips the binary.
RUN RAPTOR_VERSION="${VERSION}" RAPTOR_GIT_SHA="${REVISION}" \
    cargo build --release --locked -p raptor-server --bin raptor

# Swagger UI's files for /docs, from the lock file (only `dependencies`: swagger-ui-dist). Node
# 24 is an LTS line (supported until 2028); only npm runs here, nothing of Node is shipped.
FROM node:24.11.1-bookworm-slim AS docs-assets
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# The same Debian release as the build stage (the binary links against its glibc).
FROM debian:12.11-slim
ARG VERSION=unknown
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="raptor" \
      org.opencontainers.image.description="Raptor write API: orders, accounts, billing and sign-in for the retail trading app" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/debian:12.11-slim"
# ca-certificates: the Stripe client verifies TLS against the system roots.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home raptor
COPY --from=build /src/target/release/raptor /usr/local/bin/raptor
COPY --from=docs-assets /src/node_modules/swagger-ui-dist /usr/share/raptor/swagger-ui
# A numeric user, so orchestrators can verify it is not root.
USER 10001:10001
ENV RAPTOR_ADDR=0.0.0.0:8080 \
    RAPTOR_LOG_FORMAT=json \
    RAPTOR_DOCS_ASSETS=/usr/share/raptor/swagger-ui
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=4s --start-period=20s --retries=3 \
  CMD ["raptor", "healthcheck"]
ENTRYPOINT ["raptor"]
CMD ["serve"]
