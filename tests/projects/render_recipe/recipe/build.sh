#!/bin/bash
# top-level build and the toy output's script (dispatches on PKG_NAME)
echo "building ${PKG_NAME} megabuild=${megabuild}"
