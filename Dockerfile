FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p raptor-server --bin raptor

FROM debian:bookworm-slim
RUN useradd --system raptor
COPY --from=build /src/target/release/raptor /usr/local/bin/raptor
USER raptor
EXPOSE 8080
ENTRYPOINT ["raptor"]
CMD ["serve"]
