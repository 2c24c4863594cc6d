#!/bin/bash
echo "installing toylib into $PREFIX"
