# Thin wrapper over CMake for the README's two commands.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all build run test clean deps

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

run: build
	./$(BUILD)/anyattn bench

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD)

# Installs the library, header, CLI, pkg-config file and CMake package under
# PREFIX (default /usr/local): `make install PREFIX=$HOME/.local`.
PREFIX ?= /usr/local
.PHONY: install
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
