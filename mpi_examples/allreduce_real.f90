! A Fortran job that reduces REAL arrays with MPI_ALLREDUCE (MPI_REAL, MPI_SUM): Open MPI's Fortran
! bindings call PMPI_Allreduce directly, so this checks that the Fortran entry points are
! interposed too. Values are small integers, so every summation order gives the same bits.
!
!   mpirun -np 4 allreduce_real [n=1048576]
program allreduce_real
  use mpi
  implicit none
  integer :: ierr, rank, nranks, n, i, r, iter, bad, status
  real, allocatable :: a(:), b(:)
  real :: expected
  character(len=32) :: arg

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)

  n = 1048576  ! 4 MiB of REAL: above the default OPTIREDUCE_MIN_BYTES
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *, iostat=status) n
    if (status /= 0 .or. n < 1) then
      if (rank == 0) write (0, '(a)') 'allreduce_real: usage: allreduce_real [n >= 1]'
      call MPI_FINALIZE(ierr)
      stop 2
    end if
  end if
  allocate (a(n), b(n))

  bad = 0
  do iter = 1, 5
    do i = 1, n
      a(i) = real(mod(i + 3 * rank + iter, 17) - 8)
    end do
    ! Odd iterations reduce in place, even ones into a separate buffer: both forms are eligible.
    if (mod(iter, 2) == 1) then
      call MPI_ALLREDUCE(MPI_IN_PLACE, a, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      b = a
    else
      call MPI_ALLREDUCE(a, b, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
    if (ierr /= MPI_SUCCESS) bad = bad + 1
    do i = 1, n
      expected = 0
      do r = 0, nranks - 1
        expected = expected + real(mod(i + 3 * r + iter, 17) - 8)
      end do
      if (transfer(b(i), 0) /= transfer(expected, 0)) bad = bad + 1  ! bitwise
    end do
  end do

  call MPI_ALLREDUCE(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (bad == 0) then
      write (*, '(a,i0,a,i0,a)') 'allreduce_real: OK: 5 reductions of ', n, ' REAL on ', nranks, ' ranks'
    else
      write (*, '(a,i0,a)') 'allreduce_real: FAILED: ', bad, ' wrong entries'
    end if
  end if
  call MPI_FINALIZE(ierr)
  if (bad /= 0) stop 1
end program allreduce_real
