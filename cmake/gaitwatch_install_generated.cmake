# Runs at install time (`cmake --install`, cpack), included by the install
# code of cmake/gaitwatch_install.cmake. Writes the two installed files that
# name absolute paths, from the prefix in effect now (a `cmake --install
# --prefix P` or cpack's /usr differ from the configured prefix):
#   SYSCONFDIR/gaitwatch/gaitwatch.yaml   config/gaitwatch.yaml with absolute
#       state paths (storage.path, history.path under LOCALSTATEDIR/lib/gaitwatch)
#       and its pattern packs' includes pointing to DATADIR/gaitwatch/patterns
#       (the packs and their template directories, installed from
#       config/patterns; paths inside a pack are relative to the pack)
#   lib/systemd/system/gaitwatchd.service systemd/gaitwatchd.service.in
#   lib/systemd/system/gaitwatch-gateway.service
#       systemd/gaitwatch-gateway.service.in, when GW_HAVE_NATS (the gateway
#       is built)
# An existing config that differs is kept, and the new one is installed next
# to it as gaitwatch.yaml.new. Any key to rewrite that is not found fails the
# install: the installed config must never keep a path relative to /etc.
#
# Inputs (set by the caller): GW_SOURCE_DIR, GW_BINARY_DIR, GW_INSTALL_BINDIR,
# GW_INSTALL_SYSCONFDIR, GW_INSTALL_LOCALSTATEDIR, GW_INSTALL_DATADIR,
# GW_INSTALL_DOCDIR, GW_INSTALL_MANDIR (the CMAKE_INSTALL_<dir> values),
# GW_HAVE_NATS (ON when gaitwatchd has the JetStream gateway).

include("${GW_SOURCE_DIR}/cmake/gaitwatch_dirs.cmake")

set(prefix "${CMAKE_INSTALL_PREFIX}")
gw_full_install_dir(GW_FULL_BINDIR BINDIR "${GW_INSTALL_BINDIR}" "${prefix}")
gw_full_install_dir(gw_sysconfdir SYSCONFDIR "${GW_INSTALL_SYSCONFDIR}" "${prefix}")
gw_full_install_dir(gw_localstatedir LOCALSTATEDIR "${GW_INSTALL_LOCALSTATEDIR}" "${prefix}")
gw_full_install_dir(gw_datadir DATADIR "${GW_INSTALL_DATADIR}" "${prefix}")
gw_full_install_dir(gw_docdir DOCDIR "${GW_INSTALL_DOCDIR}" "${prefix}")
gw_full_install_dir(gw_mandir MANDIR "${GW_INSTALL_MANDIR}" "${prefix}")
set(GW_STATE_DIR "${gw_localstatedir}/lib/gaitwatch")
set(gw_config_dir "${gw_sysconfdir}/gaitwatch")
set(GW_CONFIG_FILE "${gw_config_dir}/gaitwatch.yaml")
set(gw_patterns_dir "${gw_datadir}/gaitwatch/patterns")

# --- the config -------------------------------------------------------------
file(READ "${GW_SOURCE_DIR}/config/gaitwatch.yaml" gw_config)
set(nl "\n")

# Replaces the value of `key` in the top-level section `section` (a line
# "  key: VALUE" among the section's indented lines) with `value`.
function(gw_set_section_key section key value)
  set(regex "(${nl}${section}:${nl}(  [^${nl}]*${nl})*  ${key}: )[^${nl}]*")
  string(REGEX MATCH "${regex}" found "${gw_config}")
  if(NOT found)
    message(FATAL_ERROR "gaitwatch install: ${section}.${key} not found in "
                        "${GW_SOURCE_DIR}/config/gaitwatch.yaml; the installed config needs it")
  endif()
  string(REGEX REPLACE "${regex}" "\\1${value}" replaced "${gw_config}")
  set(gw_config "${replaced}" PARENT_SCOPE)
endfunction()

gw_set_section_key(storage path "${GW_STATE_DIR}/hits.db")
gw_set_section_key(history path "${GW_STATE_DIR}/history.db")
# The console's pages are installed under DATADIR.
gw_set_section_key(console static_dir "${gw_datadir}/gaitwatch/console")
# The control socket lives in the unit's RuntimeDirectory, whatever the prefix.
gw_set_section_key(control endpoint "ipc:///run/gaitwatch/control.sock")

# Pattern packs and templates: "include: patterns/X" and "template:
# patterns/X" (and the gait section's "pack: patterns/X") are relative to the source config; the installed patterns lie
# under DATADIR (a pack's own paths are relative to the pack and need no
# rewrite).
string(REGEX MATCHALL "include: patterns/" gw_includes "${gw_config}")
if(NOT gw_includes)
  message(FATAL_ERROR "gaitwatch install: no 'include: patterns/...' in "
                      "${GW_SOURCE_DIR}/config/gaitwatch.yaml; the installed config's "
                      "patterns must use the installed pattern packs")
endif()
string(REPLACE "include: patterns/" "include: ${gw_patterns_dir}/" gw_config "${gw_config}")
string(REPLACE "template: patterns/" "template: ${gw_patterns_dir}/" gw_config "${gw_config}")
string(REPLACE "pack: patterns/" "pack: ${gw_patterns_dir}/" gw_config "${gw_config}")

# What the daemon would still resolve against the config's directory: a
# recording window ({file: ...}), a template or a pack outside the patterns,
# on a line that is not a comment.
string(REGEX MATCH "${nl}[^#${nl}]*(file: [^/]|template: [^/]|include: [^/]|pack: [^/])[^${nl}]*"
       gw_relative "${gw_config}")
if(gw_relative)
  string(STRIP "${gw_relative}" gw_relative)
  message(FATAL_ERROR "gaitwatch install: the installed config would name a file relative "
                      "to ${gw_config_dir}: '${gw_relative}'")
endif()

# A fresh directory for the generated files, removed afterwards (an install
# as root leaves nothing root-owned in the build directory).
string(RANDOM LENGTH 10 gw_random)
set(gw_gen_dir "${GW_BINARY_DIR}/CMakeFiles/gaitwatch-install-${gw_random}")
file(MAKE_DIRECTORY "${gw_gen_dir}")

file(WRITE "${gw_gen_dir}/gaitwatch.yaml"
     "# Installed copy of config/gaitwatch.yaml: state in ${GW_STATE_DIR},\n"
     "# pattern packs and templates in ${gw_patterns_dir}.\n"
     "${gw_config}")

set(gw_config_name gaitwatch.yaml)
if(EXISTS "$ENV{DESTDIR}${GW_CONFIG_FILE}")
  file(SHA256 "$ENV{DESTDIR}${GW_CONFIG_FILE}" gw_old)
  file(SHA256 "${gw_gen_dir}/gaitwatch.yaml" gw_new)
  if(NOT gw_old STREQUAL gw_new)
    set(gw_config_name gaitwatch.yaml.new)
    message(STATUS "gaitwatch install: keeping the existing $ENV{DESTDIR}${GW_CONFIG_FILE}; "
                   "the new config is ${gw_config_name} next to it")
    file(RENAME "${gw_gen_dir}/gaitwatch.yaml" "${gw_gen_dir}/${gw_config_name}")
  endif()
endif()
file(INSTALL "${gw_gen_dir}/${gw_config_name}" DESTINATION "${gw_config_dir}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# --- the unit ---------------------------------------------------------------
set(GW_UNIT_DOCUMENTATION
    "Documentation=man:gaitwatchd(8) man:gaitwatch(1) file://${gw_docdir}/README.md")
if(GW_STATE_DIR STREQUAL "/var/lib/gaitwatch")
  set(GW_UNIT_READ_WRITE_PATHS "# (none: the state directory is StateDirectory)")
else()
  set(GW_UNIT_READ_WRITE_PATHS "ReadWritePaths=${GW_STATE_DIR}")
  message(STATUS "gaitwatch install: the config's state directory is ${GW_STATE_DIR}, not the "
                 "unit's StateDirectory /var/lib/gaitwatch: create it for the user gaitwatch, "
                 "or install with --prefix /usr")
endif()
configure_file("${GW_SOURCE_DIR}/systemd/gaitwatchd.service.in"
               "${gw_gen_dir}/gaitwatchd.service" @ONLY)
file(INSTALL "${gw_gen_dir}/gaitwatchd.service" DESTINATION "${prefix}/lib/systemd/system"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
if(GW_HAVE_NATS)
  configure_file("${GW_SOURCE_DIR}/systemd/gaitwatch-gateway.service.in"
                 "${gw_gen_dir}/gaitwatch-gateway.service" @ONLY)
  file(INSTALL "${gw_gen_dir}/gaitwatch-gateway.service" DESTINATION "${prefix}/lib/systemd/system"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()

# The state directory exists after an install, so that the installed config
# passes --check-config there (it checks that storage.path's directory is
# writable); under the unit, systemd hands it to the user gaitwatch
# (StateDirectory). Mode 0700: recorded health data.
file(MAKE_DIRECTORY "$ENV{DESTDIR}${GW_STATE_DIR}")
file(CHMOD "$ENV{DESTDIR}${GW_STATE_DIR}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

file(REMOVE_RECURSE "${gw_gen_dir}")
