#!/bin/bash
echo "installing the ${with_magma} variant"
