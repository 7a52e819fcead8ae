# What `cmake --install` and the .deb put on a machine (docs/design.md
# "Installation and service"):
#   BINDIR/gaitwatchd, BINDIR/gaitwatch           (daemon/CMakeLists.txt)
#   SYSCONFDIR/gaitwatch/gaitwatch.yaml           generated at install time
#   DATADIR/gaitwatch/patterns/                   config/patterns (packs, templates)
#   DATADIR/gaitwatch/console/                    console/web (the console's pages)
#   lib/systemd/system/gaitwatchd.service         generated at install time
#   lib/systemd/system/gaitwatch-gateway.service  the same, when built with libnats
#   lib/sysusers.d/gaitwatch.conf                 the service user and group
#   DOCDIR/README.md, DOCDIR/*.md                 README.md, docs/*.md
#   MANDIR/man8/gaitwatchd.8, MANDIR/man1/gaitwatch.1
# `cmake --install build --strip` strips the binaries; cpack always does.
include("${PROJECT_SOURCE_DIR}/cmake/gaitwatch_dirs.cmake")

install(DIRECTORY config/patterns/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gaitwatch/patterns)
install(DIRECTORY console/web/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gaitwatch/console)
install(FILES systemd/gaitwatch.sysusers DESTINATION lib/sysusers.d RENAME gaitwatch.conf)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB GW_DOC_PAGES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES ${GW_DOC_PAGES} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES man/gaitwatchd.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES man/gaitwatch.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# The config and the unit name absolute paths of the prefix used at install
# time, which may differ from the configured one: generated then.
install(CODE "
  set(GW_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(GW_BINARY_DIR \"${PROJECT_BINARY_DIR}\")
  set(GW_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(GW_INSTALL_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
  set(GW_INSTALL_LOCALSTATEDIR \"${CMAKE_INSTALL_LOCALSTATEDIR}\")
  set(GW_INSTALL_DATADIR \"${CMAKE_INSTALL_DATADIR}\")
  set(GW_INSTALL_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
  set(GW_INSTALL_MANDIR \"${CMAKE_INSTALL_MANDIR}\")
  set(GW_HAVE_NATS \"${GAITWATCH_HAVE_NATS}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/gaitwatch_install_generated.cmake\")
")

# --- the Debian package (cpack -G DEB in a Release build directory;
# scripts/build-deb.sh) --------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gaitwatch)
set(CPACK_PACKAGE_VENDOR gaitwatch)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "streaming abnormal-gait detector for instrumented shoes and wearables")
set(CPACK_PACKAGE_DESCRIPTION
    "gaitwatchd ingests live sensor frames over UDP and TCP, searches every stream for example
patterns (freezing of gait, falls, stumbles) with multi-dimensional DTW under a soft deadline,
stores every hit in SQLite and publishes alerts over ZeroMQ. It runs as the systemd service
gaitwatchd; gaitwatch is its command-line companion.")
set(CPACK_PACKAGE_CONTACT "gaitwatch maintainers <gaitwatch@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Installs the way a distribution package does: prefix /usr, so the config
# goes to /etc and the state to /var/lib (absolute paths need DESTDIR staging).
# With DESTDIR staging, cpack installs with CMAKE_INSTALL_PREFIX =
# CPACK_INSTALL_PREFIX, which would otherwise be the configured /usr/local.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
# Library dependencies from the binaries (dpkg-shlibdeps); systemd for the
# unit, systemd-sysusers and systemctl in the maintainer scripts.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# tzdata: the time zone database the messages' wall-clock times come from
# (libdate-tz reads it at run time; shlibdeps cannot see that).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd, tzdata")
gw_full_install_dir(GW_DEB_SYSCONFDIR SYSCONFDIR "${CMAKE_INSTALL_SYSCONFDIR}"
                    "${CPACK_PACKAGING_INSTALL_PREFIX}")
set(GW_DEB_DIR "${PROJECT_BINARY_DIR}/deb-control")
file(WRITE "${GW_DEB_DIR}/conffiles" "${GW_DEB_SYSCONFDIR}/gaitwatch/gaitwatch.yaml\n")
foreach(script postinst prerm postrm)
  file(COPY "${PROJECT_SOURCE_DIR}/packaging/deb/${script}" DESTINATION "${GW_DEB_DIR}"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                        WORLD_READ WORLD_EXECUTE)
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${GW_DEB_DIR}/conffiles;${GW_DEB_DIR}/postinst;${GW_DEB_DIR}/prerm;${GW_DEB_DIR}/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
